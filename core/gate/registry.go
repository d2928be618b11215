package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// MaxExposedTools caps how many tools one run is shown: a large registry
// (built-ins, routines, inbox, MCP servers) must not flood every prompt.
const MaxExposedTools = 14 // 12 built-ins (share_file the latest) and the 2 routine tools

// Registry holds every declared tool. It is immutable after
// construction and safe for concurrent use.
type Registry struct {
	tools    map[string]*registered
	order    []string // registration order: the default exposure order
	defaults []string

	// source offers tools that come and go (connectors); see WithSource.
	source    core.ToolSource
	findAfter int
	find      *registered
}

type registered struct {
	tool   core.Tool
	schema *schema
	spec   core.ToolSpec
}

// NewRegistry validates and registers tools. Any invalid declaration
// (no consequence level, a bad name or schema, a target that is not a
// property, a duplicate name) is an error: the process must refuse to start
// rather than run with an unannotated tool.
func NewRegistry(tools ...core.Tool) (*Registry, error) {
	r := &Registry{tools: make(map[string]*registered, len(tools))}
	var errs []error
	for _, t := range tools {
		if err := t.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := r.tools[t.Name]; dup {
			errs = append(errs, fmt.Errorf("tool %q: registered twice", t.Name))
			continue
		}
		s, err := compileSchema(t.Schema, t.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: schema: %w", t.Name, err))
			continue
		}
		t.Targets = slices.Clone(t.Targets)
		r.tools[t.Name] = &registered{tool: t, schema: s, spec: core.ToolSpec{Name: t.Name, Description: t.Description, Schema: slices.Clone(t.Schema)}}
		r.order = append(r.order, t.Name)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tool registry: %w", errors.Join(errs...))
	}
	r.defaults = r.order[:min(len(r.order), MaxExposedTools)]
	return r, nil
}

// WithDefault returns a copy of r whose default exposure (for channels whose
// policy names no tools) is names, in that order. Unknown names are an error.
func (r *Registry) WithDefault(names ...string) (*Registry, error) {
	if len(names) > MaxExposedTools {
		return nil, fmt.Errorf("tool registry: default set of %d tools exceeds the cap of %d", len(names), MaxExposedTools)
	}
	for _, n := range names {
		if _, ok := r.tools[n]; !ok {
			return nil, fmt.Errorf("tool registry: default tool %q is not registered", n)
		}
	}
	c := *r
	c.defaults = slices.Clone(names)
	return &c, nil
}

// Get returns the tool named name.
func (r *Registry) Get(name string) (core.Tool, bool) {
	if r == nil {
		return core.Tool{}, false
	}
	t, ok := r.tools[name]
	if !ok {
		if d, ok := r.dynamic(name); ok {
			return d.tool, true
		}
		return core.Tool{}, false
	}
	return t.tool, true
}

// Names lists every registered tool in registration order.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.order)
}

// Exposed returns the tools a run in a channel with policy p may use: the
// policy's list when it names any (unknown names are skipped), the default
// set otherwise; at most MaxExposedTools.
func (r *Registry) Exposed(p core.Policy) []string {
	if r == nil {
		return nil
	}
	if len(p.Tools) == 0 {
		return slices.Clone(r.defaults)
	}
	var out []string
	for _, n := range p.Tools {
		if _, ok := r.tools[n]; ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
		if len(out) == MaxExposedTools {
			break
		}
	}
	return out
}

// Specs returns what the model is told about the named tools. When
// find_tool is among them, connector tools are left out: the model finds
// them through it.
func (r *Registry) Specs(names []string) []core.ToolSpec {
	out := make([]core.ToolSpec, 0, len(names))
	finding := slices.Contains(names, FindToolName)
	for _, n := range names {
		if t, ok := r.tools[n]; ok {
			out = append(out, t.spec)
		} else if d, ok := r.dynamic(n); ok && (!finding || d.tool.Connector == nil) {
			out = append(out, d.spec)
		}
	}
	return out
}

// CallError is the structured error a malformed tool call gets back as its
// observation; the run continues so the model can correct itself.
type CallError struct {
	Code     string   `json:"code"` // unknown-tool | invalid
	Tool     string   `json:"tool"`
	Problems []string `json:"problems"`
	Hint     string   `json:"hint,omitempty"`
}

func (e *CallError) Error() string {
	return fmt.Sprintf("tool call %s: %s: %s", e.Tool, e.Code, strings.Join(e.Problems, "; "))
}

// JSON is the observation text the model sees.
func (e *CallError) JSON() string {
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

// ValidateCall checks a model's call against the registry: the name must be
// a registered tool and the arguments a JSON object matching its schema.
// Whether the run may use the tool is the gate's decision, not this one's.
// exposed only feeds the hint.
func (r *Registry) ValidateCall(call core.ToolCall, exposed []string) (core.Tool, map[string]any, *CallError) {
	t, ok := r.tools[call.Name]
	if !ok {
		t, ok = r.dynamic(call.Name)
	}
	if !ok {
		return core.Tool{}, nil, &CallError{
			Code: "unknown-tool", Tool: call.Name,
			Problems: []string{fmt.Sprintf("no tool named %q is available in this run", call.Name)},
			Hint:     "available tools: " + strings.Join(exposed, ", "),
		}
	}
	args, err := decodeArgs(call.Args)
	if err != nil {
		return core.Tool{}, nil, &CallError{Code: "invalid", Tool: call.Name, Problems: []string{err.Error()}, Hint: "send the arguments as one JSON object matching the tool's schema"}
	}
	var problems []string
	t.schema.validate(args, "args", &problems)
	if len(problems) > 0 {
		return core.Tool{}, nil, &CallError{Code: "invalid", Tool: call.Name, Problems: problems, Hint: "fix the arguments and call the tool again"}
	}
	return t.tool, args, nil
}
