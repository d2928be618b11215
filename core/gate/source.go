package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// FindToolName is the meta-tool a channel is offered instead of its
// connector tools' schemas once it has more than the configured count.
const FindToolName = "find_tool"

// WithSource returns a copy of r that also offers src's tools (connectors)
// after the built-ins, in the channels src offers them in. Past findAfter
// such tools in one channel the model is shown find_tool instead of their
// schemas (they stay callable: find_tool tells it their names and schemas).
// findAfter 0 always shows find_tool; negative never does.
func (r *Registry) WithSource(src core.ToolSource, findAfter int) *Registry {
	c := *r
	c.source, c.findAfter = src, findAfter
	ft := findTool(src)
	s, err := compileSchema(ft.Schema, ft.Name)
	if err != nil {
		panic(err) // a constant schema
	}
	c.find = &registered{tool: ft, schema: s, spec: core.ToolSpec{Name: ft.Name, Description: ft.Description, Schema: ft.Schema}}
	return &c
}

// dynamic returns a source tool, compiled for validation. A schema outside
// the subset built-ins use (anyOf, type lists, $ref…) is not refused: the
// call is checked to be a JSON object and the server validates the rest.
func (r *Registry) dynamic(name string) (*registered, bool) {
	if r.source == nil {
		return nil, false
	}
	if name == FindToolName && r.find != nil {
		return r.find, true
	}
	t, ok := r.source.Tool(name)
	if !ok || t.Connector == nil || t.Validate() != nil {
		return nil, false
	}
	s, err := compileSchema(t.Schema, t.Name)
	if err != nil {
		s = &schema{Type: "object", Open: true}
	}
	return &registered{tool: t, schema: s, spec: core.ToolSpec{Name: t.Name, Description: t.Description, Schema: slices.Clone(t.Schema)}}, true
}

// ExposedIn returns the tools a run in channel ch with policy p may use:
// Exposed(p), then the connector tools offered in ch, then find_tool when
// they are more than the configured count.
func (r *Registry) ExposedIn(ch core.ChannelKey, p core.Policy) []string {
	out := r.Exposed(p)
	if r == nil || r.source == nil {
		return out
	}
	// A copy: the source's slice is not ours to reorder.
	tools := slices.DeleteFunc(slices.Clone(r.source.ToolsIn(ch)), func(t core.Tool) bool {
		return t.Connector != nil && slices.Contains(p.ConnectorsOff, t.Connector.Server)
	})
	for _, t := range tools {
		if _, builtin := r.tools[t.Name]; !builtin && !slices.Contains(out, t.Name) {
			out = append(out, t.Name)
		}
	}
	if r.findAfter >= 0 && len(tools) > r.findAfter {
		out = append(out, FindToolName)
	}
	return out
}

// findTool searches the connector tools offered to the calling run
// (tc.Offered: the channel's policy applied).
func findTool(src core.ToolSource) core.Tool {
	return core.Tool{
		Name: FindToolName,
		Description: "Search the connector tools available here (by words in their names and descriptions) and get their names and argument schemas. " +
			"Call the tool you find by its name afterwards.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words describing what you need, e.g. 'create github issue'"}},"required":["query"]}`),
		Consequence: core.Read,
		Run: func(_ context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return core.Observation{}, err
			}
			words := strings.Fields(strings.ToLower(a.Query))
			type hit struct {
				t     core.Tool
				score int
			}
			var hits []hit
			for _, t := range src.ToolsIn(tc.Scope.Key()) {
				// Only what the run is offered: a server the channel
				// turned off is never found there.
				if !slices.Contains(tc.Offered, t.Name) {
					continue
				}
				hay := strings.ToLower(strings.ReplaceAll(t.Name, "_", " ") + " " + t.Description)
				n := 0
				for _, w := range words {
					if strings.Contains(hay, w) {
						n++
					}
				}
				if n > 0 || len(words) == 0 {
					hits = append(hits, hit{t, n})
				}
			}
			slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
			hits = hits[:min(len(hits), 8)]
			if len(hits) == 0 {
				return core.Observation{Text: fmt.Sprintf("no connector tool matches %q", a.Query), Trust: core.Trusted}, nil
			}
			type found struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Consequence string          `json:"consequence"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			var out []found
			for _, h := range hits {
				out = append(out, found{h.t.Name, h.t.Description, string(h.t.Consequence), h.t.Schema})
			}
			b, _ := json.Marshal(out)
			// Descriptions and schemas are the servers' words: data.
			return core.Observation{Text: string(b), Trust: core.Untrusted}, nil
		},
	}
}

// maxCardArgs bounds the arguments a connector card shows.
const maxCardArgs = 2500

// connectorSummary is a connector call's approval card text: the server,
// its tool and the exact arguments the tool will get (the canonical JSON
// the gate judged), so the person approves what will be sent.
func connectorSummary(t core.Tool, args map[string]any) string {
	raw, err := CanonicalArgs(args)
	if err != nil {
		raw = []byte("(arguments could not be encoded)")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The assistant wants to run %s: tool %q of connector %q (%s), with exactly these arguments:\n", t.Name, t.Connector.Tool, t.Connector.Server, t.Consequence)
	if len(raw) <= maxCardArgs {
		b.Write(raw)
		return b.String()
	}
	b.WriteString(core.Truncate(string(raw), maxCardArgs))
	fmt.Fprintf(&b, " (%d bytes in all; the rest is in the journal: bot replay --run)", len(raw))
	return b.String()
}

// InChannel is tool as channel policy p judges it: a connector tool's
// consequence set by the channel's admins (`policy set consequence`) wins
// over the annotations and the operator's file.
func InChannel(t core.Tool, p core.Policy) core.Tool {
	if t.Connector == nil {
		return t
	}
	if c, ok := p.Consequences[t.Name]; ok && c.Valid() {
		t.Consequence = c
	}
	return t
}
