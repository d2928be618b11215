package connectors

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/marlowe-bot/marlowe/core"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfigErrorsNameFileServerAndField(t *testing.T) {
	cases := []struct {
		name, json string
		want       []string // substrings of the error
	}{
		{"unparseable", `{"mcpServers": {"a": {"command": "x",}}}`, []string{"mcp.json", "not valid JSON", "line 1"}},
		{"no mcpServers", `{"tools": {}}`, []string{"mcp.json", "mcpServers", "missing"}},
		{"mcpServers and VS Code's servers", `{"mcpServers": {}, "servers": {}}`, []string{"mcp.json", "servers", "both"}},
		{"VS Code input variable", `{"servers": {"gh": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${input:gh_token}"}}}}`, []string{"mcp.json", "server gh", "headers.Authorization", "${input:gh_token}", "VS Code input"}},
		{"unset var in env: form", `{"mcpServers": {"gh": {"command": "x", "env": {"T": "${env:NOPE}"}}}}`, []string{"server gh", "env.T", "${NOPE} is not set"}},
		// Server "a_" with tool "x" and server "a" with tool "_x" would both be "a___x".
		{"name ending in _", `{"mcpServers": {"a_": {"command": "x"}}}`, []string{"server a_", "end in"}},
		{"neither command nor url", `{"mcpServers": {"gh": {"args": ["x"]}}}`, []string{"mcp.json", "server gh", "command", "neither"}},
		{"both", `{"mcpServers": {"gh": {"command": "x", "url": "http://h"}}}`, []string{"server gh", "both"}},
		{"unset var in env", `{"mcpServers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "${NOPE}"}}}}`, []string{"mcp.json", "server gh", "env.GITHUB_TOKEN", "${NOPE} is not set"}},
		{"unset var in headers", `{"mcpServers": {"api": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${NOPE}"}}}}`, []string{"server api", "headers.Authorization", "${NOPE}"}},
		{"bad type", `{"mcpServers": {"a": {"command": "x", "type": "websocket"}}}`, []string{"server a", "type", "websocket"}},
		{"stdio type with url", `{"mcpServers": {"a": {"url": "http://h", "type": "stdio"}}}`, []string{"server a", "type"}},
		{"bad consequence", `{"mcpServers": {"a": {"command": "x", "consequences": {"t": "dangerous"}}}}`, []string{"server a", "consequences.t", "dangerous"}},
		{"bad timeout", `{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`, []string{"server a", "timeout"}},
		{"bad name", `{"mcpServers": {"a b": {"command": "x"}}}`, []string{"server a b", "name"}},
		{"double underscore name", `{"mcpServers": {"a__b": {"command": "x"}}}`, []string{"server a__b", "__"}},
		{"bad glob", `{"mcpServers": {"a": {"command": "x", "tools": {"include": ["["]}}}}`, []string{"server a", "tools", "glob"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("mcp.json", []byte(c.json), env(map[string]string{"SET": "v"}))
			if err == nil {
				t.Fatal("parsed; want an error")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a ConfigError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestParseConfigPastedFromOtherHosts(t *testing.T) {
	const file = `{
	  "mcpServers": {
	    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
	               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_TOKEN}", "PLAIN": "x-${GH_TOKEN}-y"},
	               "cwd": "/srv", "autoApprove": ["x"], "alwaysAllow": []},
	    "linear": {"type": "http", "url": "https://mcp.linear.app/mcp", "headers": {"Authorization": "Bearer ${LINEAR_KEY}"},
	               "timeout": 30, "channels": ["C1", "slack/T1/C2"], "tools": {"include": ["get_*", "list_*"], "exclude": ["list_secrets"], "mode": "x"}},
	    "old": {"type": "sse", "url": "https://h/sse", "timeout": "2m", "consequences": {"get_*": "read", "delete": "write"}},
	    "off": {"command": "x", "disabled": true}
	  },
	  "globalShortcut": "x"
	}`
	cfg, err := Parse("mcp.json", []byte(file), env(map[string]string{"GH_TOKEN": "ghp_1", "LINEAR_KEY": "lin_2"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 4 {
		t.Fatalf("servers = %d, want 4", len(cfg.Servers))
	}
	by := map[string]Server{}
	for _, s := range cfg.Servers {
		by[s.Name] = s
	}
	gh, lin, old, off := by["github"], by["linear"], by["old"], by["off"]
	if gh.Type != Stdio || gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "ghp_1" || gh.Env["PLAIN"] != "x-ghp_1-y" || gh.Cwd != "/srv" || gh.Timeout != DefaultTimeout {
		t.Errorf("github = %+v", gh)
	}
	if lin.Type != HTTP || lin.Headers["Authorization"] != "Bearer lin_2" || lin.Timeout != 30*time.Second {
		t.Errorf("linear = %+v", lin)
	}
	if old.Type != SSE || old.Timeout != 2*time.Minute {
		t.Errorf("old = %+v", old)
	}
	if !off.Disabled {
		t.Errorf("off not disabled")
	}
	warn := strings.Join(cfg.Warnings, "\n")
	for _, w := range []string{`"autoApprove"`, `"alwaysAllow"`, `"globalShortcut"`, `tools: unknown field "mode"`} {
		if !strings.Contains(warn, w) {
			t.Errorf("warnings %q do not name %s", warn, w)
		}
	}
	// include / exclude, channels, overrides
	for tool, want := range map[string]bool{"get_issue": true, "list_teams": true, "list_secrets": false, "delete_issue": false} {
		if got := lin.Wants(tool); got != want {
			t.Errorf("linear.Wants(%s) = %v", tool, got)
		}
	}
	for ch, want := range map[core.ChannelKey]bool{"slack/T1/C1": true, "slack/T1/C2": true, "slack/T1/C3": false, "discord/G/C2": false} {
		if got := lin.Offers(ch); got != want {
			t.Errorf("linear.Offers(%s) = %v", ch, got)
		}
	}
	if c, _ := old.Override("get_x"); c != core.Read {
		t.Errorf("glob override = %q", c)
	}
	if c, _ := old.Override("delete"); c != core.Write {
		t.Errorf("exact override = %q", c)
	}
}

func TestToolNames(t *testing.T) {
	long := strings.Repeat("x", 80)
	cases := []struct{ server, tool, want string }{
		{"github", "create_issue", "github__create_issue"},
		{"fs", "read.file v2", "fs__read_file_v2"},
		{"my-srv", "ünï", "my-srv__ü_n_ï"}, // replaced below
	}
	cases[2].want = "my-srv___n_"
	for _, c := range cases {
		if got := ToolName(c.server, c.tool); got != c.want {
			t.Errorf("ToolName(%q,%q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	a, b := ToolName("srv", long+"a"), ToolName("srv", long+"b")
	if len(a) != MaxToolName || len(b) != MaxToolName || a == b {
		t.Errorf("long names: %q %q", a, b)
	}
	if a != ToolName("srv", long+"a") {
		t.Error("hash not stable")
	}
	if ToolName("a", "x") == ToolName("b", "x") {
		t.Error("two servers' tools of one name collide")
	}
}

func TestConsequenceFromAnnotations(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name     string
		a        *mcp.ToolAnnotations
		override core.Consequence
		want     core.Consequence
	}{
		{"no annotations", nil, "", core.Irreversible},
		{"empty annotations", &mcp.ToolAnnotations{}, "", core.Irreversible},
		{"readOnly", &mcp.ToolAnnotations{ReadOnlyHint: true}, "", core.Read},
		{"readOnly openWorld", &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}, "", core.Read},
		{"not destructive", &mcp.ToolAnnotations{DestructiveHint: &no}, "", core.Write},
		{"destructive", &mcp.ToolAnnotations{DestructiveHint: &yes}, "", core.Irreversible},
		{"not destructive openWorld", &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}, "", core.Send},
		{"not destructive closed world", &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}, "", core.Write},
		{"destructive openWorld stays irreversible", &mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes}, "", core.Irreversible},
		{"idempotent only", &mcp.ToolAnnotations{IdempotentHint: true}, "", core.Irreversible},
		{"override lowers", nil, core.Write, core.Write},
		{"override raises", &mcp.ToolAnnotations{ReadOnlyHint: true}, core.Irreversible, core.Irreversible},
	}
	for _, c := range cases {
		if got := Consequence(c.a, c.override); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDefinitionChangesWithNameAnnotationsAndSchemaOnly(t *testing.T) {
	yes := true
	base := &mcp.Tool{Name: "echo", Description: "one", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	d := Definition(base)
	same := *base
	same.Description = "another description"
	same.InputSchema = map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string"}}, "type": "object"}
	if Definition(&same) != d {
		t.Error("the description or key order changed the definition")
	}
	for name, mut := range map[string]func(*mcp.Tool){
		"name":        func(x *mcp.Tool) { x.Name = "echo2" },
		"annotations": func(x *mcp.Tool) { x.Annotations = &mcp.ToolAnnotations{DestructiveHint: &yes} },
		"schema":      func(x *mcp.Tool) { x.InputSchema = map[string]any{"type": "object"} },
	} {
		x := *base
		mut(&x)
		if Definition(&x) == d {
			t.Errorf("a changed %s kept the definition", name)
		}
	}
}

// Configurations pasted from VS Code (.vscode/mcp.json: "servers", an
// "inputs" list, ${env:VAR}) and Cursor (${env:VAR}) work as they are.
func TestParseConfigPastedFromVSCodeAndCursor(t *testing.T) {
	cases := []struct {
		name, json string
		findAfter  int
	}{
		{"vs code", `{"inputs": [], "servers": {"gh": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
			"headers": {"Authorization": "Bearer ${env:GH_TOKEN}"}}}}`, DefaultFindToolAfter},
		{"cursor", `{"mcpServers": {"gh": {"url": "https://api.githubcopilot.com/mcp/",
			"headers": {"Authorization": "Bearer ${env:GH_TOKEN}"}}}, "findToolAfter": -1}`, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("mcp.json", []byte(c.json), env(map[string]string{"GH_TOKEN": "ghp_1"}))
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Servers) != 1 || cfg.Servers[0].Type != HTTP || cfg.Servers[0].Headers["Authorization"] != "Bearer ghp_1" {
				t.Errorf("servers = %+v", cfg.Servers)
			}
			if cfg.FindToolAfter != c.findAfter { // negative: never find_tool (gate.WithSource)
				t.Errorf("findToolAfter = %d, want %d", cfg.FindToolAfter, c.findAfter)
			}
		})
	}
}
