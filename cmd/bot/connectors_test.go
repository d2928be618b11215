package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// buildMCPTestServer builds the connectors package's Go test server.
func buildMCPTestServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../connectors/internal/testserver").CombinedOutput(); err != nil {
		t.Fatalf("building the MCP test server: %v\n%s", err, out)
	}
	return bin
}

func writeMCPConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A connector configuration serve cannot use stops it with an error naming
// the file, the server and the field, and doctor shows the same with ✗.
func TestServeAndDoctorRefuseABadConnectorConfig(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"unparseable", `{"mcpServers": {`, "not valid JSON"},
		{"neither command nor url", `{"mcpServers": {"github": {"args": []}}}`, `server github: command: neither "command"`},
		{"unset variable", `{"mcpServers": {"github": {"command": "x", "env": {"GITHUB_TOKEN": "${MARLOWE_TEST_UNSET_TOKEN}"}}}}`, "server github: env.GITHUB_TOKEN: ${MARLOWE_TEST_UNSET_TOKEN} is not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := writeMCPConfig(t, c.body)
			vars := map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_HTTP_ADDR": "127.0.0.1:0", "MARLOWE_MCP_CONFIG": file}
			_, err := runBot(t, env(vars), "", "serve")
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("serve: %v, want an error naming %s and %q", err, file, c.want)
			}
			lines := doctorLines(t, vars, "connectors")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "✗") || !strings.Contains(lines[0], c.want) {
				t.Errorf("doctor: %q", lines)
			}
		})
	}
}

// doctor starts each server once: a working one shows its transport and
// tool count, a broken one ✗ with its last stderr lines, an unknown field
// is a warning.
func TestDoctorShowsEachConnector(t *testing.T) {
	bin := buildMCPTestServer(t)
	file := writeMCPConfig(t, `{"mcpServers": {
		"good": {"command": "`+bin+`", "autoApprove": []},
		"bad": {"command": "`+bin+`", "env": {"TESTSERVER_FAIL_START": "fatal: token ${TOKEN_FOR_TEST} rejected"}}
	}}`)
	vars := map[string]string{"MARLOWE_MCP_CONFIG": file, "TOKEN_FOR_TEST": "t0k"}
	if l := doctorLines(t, vars, "connector good"); len(l) != 1 || !strings.HasPrefix(l[0], "✓") || !strings.Contains(l[0], "stdio, 12 tools") {
		t.Errorf("good: %q", l)
	}
	if l := doctorLines(t, vars, "connector bad"); len(l) != 1 || !strings.HasPrefix(l[0], "✗") || !strings.Contains(l[0], "token t0k rejected") {
		t.Errorf("bad: %q", l)
	}
	if l := doctorLines(t, vars, "connectors"); len(l) != 1 || !strings.HasPrefix(l[0], "!") || !strings.Contains(l[0], `"autoApprove"`) {
		t.Errorf("warning: %q", l)
	}
}

// doctor names the tools that take a chat room without being declared
// under "rooms" (a go-sdk server over HTTP), so the operator decides
// whether the reachability rule should check them.
func TestDoctorNamesUndeclaredRoomArguments(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "chatops", Version: "1"}, nil)
	type post struct {
		ChannelID string `json:"channel_id"`
		Text      string `json:"text"`
	}
	for _, name := range []string{"post_message", "post_declared"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, post) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	file := writeMCPConfig(t, `{"mcpServers": {"chatops": {"url": "`+hs.URL+`", "rooms": {"post_declared": "channel_id"}}}}`)
	l := doctorLines(t, map[string]string{"MARLOWE_MCP_CONFIG": file}, "connector chatops")
	if len(l) != 2 || !strings.HasPrefix(l[0], "✓") || !strings.HasPrefix(l[1], "!") ||
		!strings.Contains(l[1], "post_message (channel_id)") || strings.Contains(l[1], "post_declared") || !strings.Contains(l[1], `"rooms"`) {
		t.Errorf("doctor: %q", l)
	}
}
