package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// schema is the JSON-schema subset tool declarations may use: type (object,
// string, number, integer, boolean, array), properties, required, enum and
// items. It is compiled once at registration so a malformed schema stops the
// process at start, not a run at call time.
type schema struct {
	Type       string
	Properties map[string]*schema
	Required   []string
	Enum       []any
	Items      *schema
	// Open accepts any properties: a connector tool's schema outside this
	// subset is checked only to be an object (the server checks the rest).
	Open bool
}

type rawSchema struct {
	Type        string                     `json:"type"`
	Properties  map[string]json.RawMessage `json:"properties"`
	Required    []string                   `json:"required"`
	Enum        []any                      `json:"enum"`
	Items       json.RawMessage            `json:"items"`
	Description string                     `json:"description"`
}

func compileSchema(raw json.RawMessage, path string) (*schema, error) {
	var r rawSchema
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: not a JSON schema object: %w", path, err)
	}
	s := &schema{Type: r.Type, Required: r.Required, Enum: r.Enum}
	switch r.Type {
	case "object", "string", "number", "integer", "boolean", "array":
	case "":
		return nil, fmt.Errorf("%s: missing type", path)
	default:
		return nil, fmt.Errorf("%s: unsupported type %q (want object, string, number, integer, boolean or array)", path, r.Type)
	}
	if len(r.Properties) > 0 {
		if r.Type != "object" {
			return nil, fmt.Errorf("%s: properties on a %s", path, r.Type)
		}
		s.Properties = make(map[string]*schema, len(r.Properties))
		for name, p := range r.Properties {
			ps, err := compileSchema(p, path+"."+name)
			if err != nil {
				return nil, err
			}
			s.Properties[name] = ps
		}
	}
	for _, req := range r.Required {
		if _, ok := s.Properties[req]; !ok {
			return nil, fmt.Errorf("%s: required %q is not a property", path, req)
		}
	}
	if len(r.Items) > 0 {
		if r.Type != "array" {
			return nil, fmt.Errorf("%s: items on a %s", path, r.Type)
		}
		is, err := compileSchema(r.Items, path+"[]")
		if err != nil {
			return nil, err
		}
		s.Items = is
	}
	return s, nil
}

// validate checks v (decoded with UseNumber) against s and returns every
// problem found, in a stable order, so the model gets one complete list.
func (s *schema) validate(v any, path string, problems *[]string) {
	add := func(format string, args ...any) {
		*problems = append(*problems, path+": "+fmt.Sprintf(format, args...))
	}
	if !s.typeMatches(v) {
		add("want %s, got %s", s.Type, jsonTypeName(v))
		return
	}
	if len(s.Enum) > 0 && !enumContains(s.Enum, v) {
		add("must be one of %s", enumList(s.Enum))
	}
	switch s.Type {
	case "object":
		obj := v.(map[string]any)
		for _, req := range s.Required {
			if _, ok := obj[req]; !ok {
				add("missing required property %q", req)
			}
		}
		names := make([]string, 0, len(obj))
		for name := range obj {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ps := s.Properties[name]
			if ps == nil && s.Open {
				continue
			}
			if ps == nil {
				if p := s.foldedProperty(name); p != "" {
					add("unknown property %q (did you mean %q? names are case-sensitive)", name, p)
				} else {
					add("unknown property %q (allowed: %s)", name, s.propertyList())
				}
				continue
			}
			ps.validate(obj[name], path+"."+name, problems)
		}
	case "array":
		if s.Items != nil {
			for i, item := range v.([]any) {
				s.Items.validate(item, fmt.Sprintf("%s[%d]", path, i), problems)
			}
		}
	}
}

// foldedProperty returns the declared property equal to name under case
// folding, or "".
func (s *schema) foldedProperty(name string) string {
	for p := range s.Properties {
		if strings.EqualFold(p, name) {
			return p
		}
	}
	return ""
}

func (s *schema) propertyList() string {
	if len(s.Properties) == 0 {
		return "none"
	}
	names := make([]string, 0, len(s.Properties))
	for p := range s.Properties {
		names = append(names, p)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (s *schema) typeMatches(v any) bool {
	switch s.Type {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		if _, err := n.Int64(); err == nil {
			return true
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
	}
	return false
}

func jsonTypeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func enumContains(enum []any, v any) bool {
	for _, e := range enum {
		if en, ok := e.(json.Number); ok {
			if vn, ok := v.(json.Number); ok && en.String() == vn.String() {
				return true
			}
			continue
		}
		if e == v {
			return true
		}
	}
	return false
}

func enumList(enum []any) string {
	parts := make([]string, 0, len(enum))
	for _, e := range enum {
		b, _ := json.Marshal(e)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, ", ")
}

// decodeArgs parses a model's argument text as a JSON object. An empty
// argument text counts as {} (some providers send "" for no arguments).
// A key repeated in one object, exactly or differing only in case, is an
// error: encoding/json would match either to the same struct field (last
// one wins), so the gate could judge one value while the tool used another.
func decodeArgs(args string) (map[string]any, error) {
	if strings.TrimSpace(args) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	v, err := decodeStrict(dec, "args")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("arguments are not valid JSON: trailing data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonTypeName(v))
	}
	return obj, nil
}

// decodeStrict reads one JSON value token by token, refusing duplicate and
// case-variant keys at any depth.
func decodeStrict(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			folded := map[string]string{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("arguments are not valid JSON: object key is not a string")
				}
				if prev, dup := folded[strings.ToLower(k)]; dup {
					if prev == k {
						return nil, fmt.Errorf("%s: duplicate key %q", path, k)
					}
					return nil, fmt.Errorf("%s: keys %q and %q differ only in case; send each argument once, spelled as in the schema", path, prev, k)
				}
				folded[strings.ToLower(k)] = k
				v, err := decodeStrict(dec, path+"."+k)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; dec.More(); i++ {
				v, err := decodeStrict(dec, fmt.Sprintf("%s[%d]", path, i))
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
			}
			return arr, nil
		}
		return nil, fmt.Errorf("arguments are not valid JSON: unexpected %v", t)
	default:
		return tok, nil // string, json.Number, bool or nil
	}
}

// CanonicalArgs is the one encoding of validated arguments a tool receives:
// what the gate decided on, re-encoded (keys sorted), never the model's bytes.
func CanonicalArgs(args map[string]any) (json.RawMessage, error) {
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encoding validated arguments: %w", err)
	}
	return b, nil
}

// sortedKeys is used for deterministic rendering of arguments.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Summary renders a call for an approval card: the tool and the arguments
// it will run with, each shortened.
func Summary(t core.Tool, args map[string]any) string {
	if t.Connector != nil {
		return connectorSummary(t, args)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The assistant wants to run %s:", t.Name)
	for _, k := range sortedKeys(args) {
		fmt.Fprintf(&b, "\n• %s: %s", k, core.Truncate(scalarString(args[k]), 300))
	}
	return b.String()
}
