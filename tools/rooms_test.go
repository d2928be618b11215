package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// roomsSurface is the fake surface with workspaces (core.Rooms), as Slack
// teams and Discord guilds: channel ids and user ids known to the bot in
// more than one workspace.
type roomsSurface struct {
	*coretest.FakeSurface
	channels map[string]string          // channel → workspace
	users    map[string]map[string]bool // workspace → users
}

func (s roomsSurface) ChannelWorkspace(_ context.Context, ch string) (string, error) {
	return s.channels[ch], nil
}

func (s roomsSurface) UserInWorkspace(_ context.Context, ws, user string) (bool, error) {
	return s.users[ws][user], nil
}

// memberSurface is the fake surface without workspaces (core.MembershipChecker,
// as Telegram): who belongs to which chat.
type memberSurface struct {
	*coretest.FakeSurface
	members map[string]map[string]bool // chat → users
}

func (s memberSurface) IsMember(_ context.Context, chat, user string) (bool, error) {
	return s.members[chat][user], nil
}

// refusedBeforeAsking checks that the call was refused with a reason
// naming why, with no permission asked and no card shown.
func (w *world) refusedBeforeAsking(tool, why string) {
	w.t.Helper()
	var refused string
	for _, c := range w.j.All(core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"}.Key()) {
		if c.Kind() == core.KindToolCompleted {
			if p, _ := core.Decode[*core.ToolCompleted](c); p.Tool == tool && !p.OK {
				refused = p.Error
			}
		}
	}
	if !strings.Contains(refused, why) {
		w.t.Fatalf("%s not refused for %q (result %q); decisions %v", tool, why, refused, w.decisions())
	}
	if d := w.decisions(); len(d) != 0 {
		w.t.Fatalf("the gate was asked about a call outside the requester's room: %v", d)
	}
	if c := w.s.Cards(); len(c) != 0 {
		w.t.Fatalf("a card for a call outside the requester's room: %q", c[0].Out.Card.Title)
	}
}

// Attack (confused deputy across rooms): someone in workspace W1 names a
// channel of workspace W2 (the bot is in both; ids are global, as on
// Discord). post_to_channel refuses it with a reason before any card, even
// though the requester named it; a channel of their own workspace goes out.
func TestAttackPostIntoAnotherWorkspaceIsRefused(t *testing.T) {
	wrap := func(s *coretest.FakeSurface) core.Surface {
		return roomsSurface{FakeSurface: s, channels: map[string]string{"C1": "W1", "COWN": "W1", "COTHER": "W2"},
			users: map[string]map[string]bool{"W1": {"UALICE": true}, "W2": {"UALICE": true}}}
	}
	w := newWorldOn(t, wrap, call("post_to_channel", `{"channel":"COTHER","text":"hello"}`), coretest.Text("done"))
	w.ask(alice, "post hello to <#COTHER>")
	w.refusedBeforeAsking("post_to_channel", "cannot read that room")
	if n := len(w.s.PostsIn("COTHER")); n != 0 {
		t.Fatal("posted into another workspace")
	}
	w = newWorldOn(t, wrap, call("post_to_channel", `{"channel":"COWN","text":"hello"}`), coretest.Text("done"))
	w.ask(alice, "post hello to <#COWN>")
	if n := len(w.s.PostsIn("COWN")); n != 1 {
		t.Fatalf("%d posts into the requester's own workspace, want 1 (decisions %v)", n, w.decisions())
	}
}

// Attack (confused deputy across rooms): dm_person refuses someone who is
// not in the conversation's workspace.
func TestAttackDMIntoAnotherWorkspaceIsRefused(t *testing.T) {
	wrap := func(s *coretest.FakeSurface) core.Surface {
		return roomsSurface{FakeSurface: s, users: map[string]map[string]bool{"W1": {"UALICE": true}, "W2": {"UBOB": true}}}
	}
	w := newWorldOn(t, wrap, call("dm_person", `{"user":"UBOB","text":"hello"}`), coretest.Text("done"))
	w.ask(alice, "DM <@UBOB> hello")
	w.refusedBeforeAsking("dm_person", "not in the workspace")
	if n := len(w.s.PostsIn("D-UBOB")); n != 0 {
		t.Fatal("a DM to someone of another workspace")
	}
}

// Attack (confused deputy across rooms), where no workspace exists
// (Telegram): a chat the requester does not belong to is refused; so is a
// DM to someone outside the requester's chat. A chat they belong to goes out.
func TestAttackPostIntoAChatTheRequesterIsNotInIsRefused(t *testing.T) {
	wrap := func(s *coretest.FakeSurface) core.Surface {
		return memberSurface{FakeSurface: s, members: map[string]map[string]bool{"C1": {"UALICE": true}, "-100200": {"UBOB": true}, "-100300": {"UALICE": true}}}
	}
	w := newWorldOn(t, wrap, call("post_to_channel", `{"channel":"-100200","text":"hello"}`), coretest.Text("done"))
	w.ask(alice, "post hello to -100200")
	w.refusedBeforeAsking("post_to_channel", "cannot read that room")
	w = newWorldOn(t, wrap, call("dm_person", `{"user":"UBOB","text":"hello"}`), coretest.Text("done"))
	w.ask(alice, "DM <@UBOB> hello")
	w.refusedBeforeAsking("dm_person", "not in the workspace (or chat)")
	w = newWorldOn(t, wrap, call("post_to_channel", `{"channel":"-100300","text":"hello"}`), coretest.Text("done"))
	w.ask(alice, "post hello to -100300")
	if n := len(w.s.PostsIn("-100300")); n != 1 {
		t.Fatalf("%d posts into the requester's own chat, want 1 (decisions %v)", n, w.decisions())
	}
}
