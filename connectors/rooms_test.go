package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// readers is a fake platform surface that says who can read which room
// (core.RoomReader), as Slack or Discord would answer.
type readers struct {
	*coretest.FakeSurface
	can map[string][]string // channel → who can read it
}

func (r readers) CanRead(_ context.Context, ch, user string) (bool, error) {
	return slices.Contains(r.can[ch], user), nil
}

// ATTACK (a connector that posts): a server whose tool posts into a room
// of the bot's own platform, with the bot's credentials, could be told to
// post into a private channel the requester cannot read, or into another
// person's DM: nothing but the approval stood in the way. Declared in
// "rooms" (tool → the argument naming the room), the room is a target and
// the reachability rule decides it before the gate (Check) and again when
// the call runs. The reference server's echo stands in for the posting
// tool, its text argument for the room. On the old code "rooms" was an
// unknown field: the tool had no check and the call went out.
func TestAttackConnectorPostIntoARoomTheRequesterCannotReadIsRefused(t *testing.T) {
	file := fmt.Sprintf(`{"mcpServers":{"chat":{"command":%q,"rooms":{"echo":"text"}}}}`, testServerBin)
	cfg, err := Parse("mcp.json", []byte(file), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	m, _ := startConfig(t, cfg, Options{})
	ctx := t.Context()
	tool, ok := m.Tool("chat__echo")
	if !ok {
		t.Fatal("no tool chat__echo")
	}
	if !slices.Contains(tool.Targets, "text") {
		t.Errorf("the room argument is not a target: %v", tool.Targets)
	}
	if tool.Check == nil {
		t.Fatal("a connector tool that posts into a room has no reachability check")
	}
	surface := readers{FakeSurface: coretest.NewFakeSurface("test", "UBOT"),
		can: map[string][]string{"C1": {"UALICE", "UBOB"}, "CPRIV": {"UBOB"}, "DBOB": {"UBOB"}}}
	tc := core.ToolContext{Scope: core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"},
		Actor: core.Person{ID: "UALICE"}, Surface: surface}
	for _, tc2 := range []struct {
		name, room string
		ok         bool
	}{
		{"a private channel she is not in", "CPRIV", false},
		{"another person's DM", "DBOB", false},
		{"no room", "", false},
		{"the room she asked in", "C1", true},
	} {
		t.Run(tc2.name, func(t *testing.T) {
			args := json.RawMessage(fmt.Sprintf(`{"text":%q}`, tc2.room))
			_, cerr := tool.Check(ctx, tc, args)
			obs, rerr := tool.Run(ctx, tc, args)
			if tc2.ok {
				if cerr != nil || rerr != nil || obs.Text != tc2.room {
					t.Fatalf("refused a room she reads: check %v, run %v (%q)", cerr, rerr, obs.Text)
				}
				return
			}
			for what, err := range map[string]error{"check": cerr, "run": rerr} {
				if err == nil {
					t.Fatalf("%s: not refused", what)
				}
				if tc2.room != "" && (!errors.Is(err, core.ErrUnreachable) || strings.Contains(err.Error(), tc2.room)) {
					t.Fatalf("%s: %v, want the rule's refusal naming no room", what, err)
				}
			}
			if obs.Text != "" {
				t.Fatalf("the server was called: %q", obs.Text)
			}
		})
	}
}

// A "rooms" entry is checked when the file is read.
func TestRoomsConfigErrors(t *testing.T) {
	for _, tc := range []struct{ rooms, want string }{
		{`{"post_[":"channel"}`, "bad glob"},
		{`{"post":" "}`, "name of the argument"},
	} {
		file := `{"mcpServers":{"chat":{"command":"x","rooms":` + tc.rooms + `}}}`
		_, err := Parse("mcp.json", []byte(file), func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "rooms.") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rooms %s: %v, want an error naming rooms and %q", tc.rooms, err, tc.want)
		}
	}
}
