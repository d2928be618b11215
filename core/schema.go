package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
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
			if ps := s.Properties[name]; ps != nil {
				ps.validate(obj[name], path+"."+name, problems)
			}
		}
	case "array":
		if s.Items != nil {
			for i, item := range v.([]any) {
				s.Items.validate(item, fmt.Sprintf("%s[%d]", path, i), problems)
			}
		}
	}
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
func decodeArgs(args string) (map[string]any, error) {
	if strings.TrimSpace(args) == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("arguments are not valid JSON: trailing data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonTypeName(v))
	}
	return obj, nil
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
