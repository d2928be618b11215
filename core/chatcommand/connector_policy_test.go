package chatcommand

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
)

type oneTool struct{ t core.Tool }

func (o oneTool) ToolsIn(core.ChannelKey) []core.Tool { return []core.Tool{o.t} }
func (o oneTool) Tool(n string) (core.Tool, bool)     { return o.t, n == o.t.Name }

// Channel admins turn a connector off and change a connector tool's
// consequence with the policy grammar; the registry and the gate follow.
func TestPolicySetConnectorAndConsequence(t *testing.T) {
	tool := core.Tool{Name: "github__create_issue", Consequence: core.Write, Schema: json.RawMessage(`{"type":"object"}`),
		Connector: &core.ToolOrigin{Server: "github", Tool: "create_issue"},
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			return core.Observation{}, nil
		}}
	base, err := gate.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	reg := base.WithSource(oneTool{tool}, 20)
	ch := core.ChannelKey("slack/T/C1")
	var pol core.Policy
	if got := reg.ExposedIn(ch, pol); len(got) != 1 {
		t.Fatalf("exposed = %v", got)
	}
	cases := []struct {
		key   string
		value []string
		check func(core.Policy) string
		err   string
	}{
		{"connector", []string{"github", "off"}, func(p core.Policy) string {
			if len(reg.ExposedIn(ch, p)) != 0 {
				return "github still offered"
			}
			return ""
		}, ""},
		{"connector", []string{"github", "on"}, func(p core.Policy) string {
			if len(reg.ExposedIn(ch, p)) != 1 {
				return "github not offered again"
			}
			return ""
		}, ""},
		{"consequence", []string{"github__create_issue", "irreversible"}, func(p core.Policy) string {
			if gate.InChannel(tool, p).Consequence != core.Irreversible {
				return "consequence not raised"
			}
			return ""
		}, ""},
		{"consequence", []string{"github__create_issue", "default"}, func(p core.Policy) string {
			if gate.InChannel(tool, p).Consequence != core.Write {
				return "consequence not back to the annotations'"
			}
			return ""
		}, ""},
		{"consequence", []string{"remember", "read"}, nil, "no connector tool"},
		{"consequence", []string{"github__create_issue", "harmless"}, nil, "want read"},
		{"connector", []string{"github"}, nil, "policy set connector"},
	}
	for _, c := range cases {
		np, err := ApplyPolicySet(pol, reg, c.key, c.value)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %v: error %v, want %q", c.key, c.value, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %v: %v", c.key, c.value, err)
		}
		if msg := c.check(np); msg != "" {
			t.Errorf("%s %v: %s", c.key, c.value, msg)
		}
		pol = np
	}
	if d := DescribePolicy(core.Policy{ConnectorsOff: []string{"github"}, Consequences: map[string]core.Consequence{"github__create_issue": core.Send}}, reg); !strings.Contains(d, "connectors off: github") || !strings.Contains(d, "consequence of github__create_issue: send") {
		t.Errorf("policy description: %s", d)
	}
}
