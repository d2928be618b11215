package connectors

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// roomServer is a go-sdk MCP server over streamable HTTP whose tools take
// chat-room-like arguments, or not.
func roomServer(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "chatops", Version: "1"}, nil)
	type post struct {
		ChannelID string `json:"channel_id"`
		Text      string `json:"text"`
	}
	type read struct {
		Channel string `json:"channel"`
	}
	type issue struct {
		Repo string `json:"repo"`
	}
	ok := func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "post_message"}, func(ctx context.Context, r *mcp.CallToolRequest, _ post) (*mcp.CallToolResult, any, error) {
		return ok(ctx, r, nil)
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "post_declared"}, func(ctx context.Context, r *mcp.CallToolRequest, _ post) (*mcp.CallToolResult, any, error) {
		return ok(ctx, r, nil)
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_channel", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(ctx context.Context, r *mcp.CallToolRequest, _ read) (*mcp.CallToolResult, any, error) {
		return ok(ctx, r, nil)
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "create_issue"}, func(ctx context.Context, r *mcp.CallToolRequest, _ issue) (*mcp.CallToolResult, any, error) {
		return ok(ctx, r, nil)
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// A tool that takes a chat room and is not declared under "rooms" is
// named in the server's state (doctor shows it), whether it reads or
// writes; a declared one and one without such an argument are not. Before,
// nothing told the operator that such a tool went unchecked.
func TestUndeclaredRoomArgumentsAreNamed(t *testing.T) {
	url := roomServer(t)
	m, _ := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{{
		Name: "chatops", Type: HTTP, URL: url, Timeout: 10 * time.Second,
		Rooms: map[string]string{"post_declared": "channel_id"},
	}}}, Options{})
	st := m.States()
	if len(st) != 1 || st[0].Status != "ready" {
		t.Fatalf("states: %+v", st)
	}
	if want := []string{"post_message (channel_id)", "read_channel (channel)"}; !slices.Equal(st[0].RoomHints, want) {
		t.Fatalf("room hints %q, want %q", st[0].RoomHints, want)
	}
}

func TestRoomArgs(t *testing.T) {
	for _, tc := range []struct {
		schema any
		want   []string
	}{
		{map[string]any{"properties": map[string]any{"channel_id": 1, "text": 1}}, []string{"channel_id"}},
		{map[string]any{"properties": map[string]any{"chatId": 1, "Room": 1, "conversation-id": 1, "repo": 1}}, []string{"Room", "chatId", "conversation-id"}},
		{map[string]any{"properties": map[string]any{"channels_count": 1, "chatter": 1}}, nil},
		{map[string]any{"type": "object"}, nil},
		{nil, nil},
	} {
		if got := roomArgs(tc.schema); !slices.Equal(got, tc.want) {
			t.Errorf("roomArgs(%v) = %q, want %q", tc.schema, got, tc.want)
		}
	}
}
