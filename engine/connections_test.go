package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/store/sqlite"
	"github.com/marlowe-bot/marlowe/vault"
)

// lateEvents forwards the sign-in service's events to the engine built
// after it (cmd/bot wires the same way).
type lateEvents struct {
	mu sync.Mutex
	e  *engine.Engine
}

func (l *lateEvents) ConnectionChanged(ctx context.Context, platform string, ev core.ConnectionChanged) error {
	l.mu.Lock()
	e := l.e
	l.mu.Unlock()
	return e.ConnectionChanged(ctx, platform, ev)
}

const tokenMark = "AT-5ec2e7-"

// connHarness: a real sign-in service over a sealed SQLite vault, with
// grants put straight into the vault (the OAuth flow itself is tested in
// package signin), wired to an engine where Alice is an operator.
func connHarness(t *testing.T) (*harness, *signin.Service, *vault.Vault) {
	return connHarnessWith(t, nil, func(*signin.Service) []core.Tool { return memTools() }, true)
}

func connHarnessWith(t *testing.T, model *coretest.ScriptedModel, tools func(*signin.Service) []core.Tool, grants bool, opts ...func(*engine.Config)) (*harness, *signin.Service, *vault.Vault) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kr, err := vault.ParseKeyring(vault.NewKey(), "")
	if err != nil {
		t.Fatal(err)
	}
	v := vault.New(st, kr, nil)
	links, err := signin.NewLinks([]byte("0123456789abcdef0123456789abcdef"), "https://marlowe.example")
	if err != nil {
		t.Fatal(err)
	}
	ev := &lateEvents{}
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	svc, err := signin.New(signin.Config{Vault: v, Links: links, Events: ev, Now: clk.Now,
		Servers: []signin.Server{{Name: "github", URL: "https://mcp.example/github"}, {Name: "linear", URL: "https://mcp.example/linear"}}})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]func(*engine.Config){operatorAlice, func(c *engine.Config) { c.Connections = svc }}, opts...)
	h := newHarness(t, model, tools(svc), opts...)
	h.clk = clk
	ev.mu.Lock()
	ev.e = h.e
	ev.mu.Unlock()
	if !grants {
		return h, svc, v
	}
	for _, g := range []struct {
		who, server string
		exp         time.Duration
	}{{alice.ID, "github", time.Hour}, {alice.ID, "linear", time.Hour}, {bob.ID, "github", time.Minute}} {
		c := core.Connection{Platform: platform, Person: g.who, Server: g.server, ConnectedAt: clk.Now()}
		if err := v.Put(t.Context(), c, vault.Grant{AccessToken: tokenMark + g.who + g.server, Expiry: clk.Now().Add(g.exp)}); err != nil {
			t.Fatal(err)
		}
	}
	return h, svc, v
}

// sayDM is p's message in their DM; it returns what the bot posted there
// in answer.
func (h *harness) sayDM(p core.Person, text string) string {
	h.t.Helper()
	before := len(h.s.PostsIn("D-" + p.ID))
	h.deliver(h.inDM(p, text))
	h.idle()
	var out []string
	for _, post := range h.s.PostsIn("D-" + p.ID)[before:] {
		out = append(out, post.Out.Text)
	}
	return strings.Join(out, "\n")
}

func TestConnectionsCommandsForgetMeAndNoTokenAnywhere(t *testing.T) {
	h, svc, _ := connHarness(t)
	ctx := t.Context()

	got := h.sayDM(alice, "connections")
	if !strings.Contains(got, "`github`") || !strings.Contains(got, "`linear`") || strings.Contains(got, "UBOB") {
		t.Errorf("alice's connections = %q", got)
	}
	// Asked in a channel, the answer goes to the DM only.
	if reply := h.say(bob, "connections"); !strings.Contains(reply, "direct message") {
		t.Errorf("connections in a channel answered %q there", reply)
	}
	if dm := h.s.PostsIn("D-" + bob.ID); len(dm) == 0 || !strings.Contains(dm[len(dm)-1].Out.Text, "`github`") {
		t.Errorf("bob's DM: %+v", dm)
	}
	// Who connected what: operators only.
	if got := h.sayDM(bob, "connections all"); !strings.Contains(got, "Only an operator") {
		t.Errorf("bob's connections all = %q", got)
	}
	if got := h.sayDM(alice, "connections all"); !strings.Contains(got, "<@UBOB> → `github`") || !strings.Contains(got, "<@UALICE> → `linear`") {
		t.Errorf("operator's connections all = %q", got)
	}

	// Bob cannot disconnect Alice: `disconnect` is always one's own.
	if got := h.sayDM(bob, "disconnect linear"); !strings.Contains(got, "no connection to `linear`") {
		t.Errorf("bob disconnect linear = %q", got)
	}
	if got := h.sayDM(alice, "disconnect github"); !strings.Contains(got, "Disconnected `github`") {
		t.Errorf("disconnect = %q", got)
	}
	cc := payloads[*core.ConnectionChanged](h, "D-"+alice.ID, core.KindConnectionChanged)
	if len(cc) != 1 || cc[0].Event != core.ConnRevoked || cc[0].Server != "github" || cc[0].By != alice.ID {
		t.Fatalf("journaled: %+v", cc)
	}

	// Bob's token lapses with no way to refresh it: he alone is asked to
	// connect again, in his DM, with a link of his own.
	h.clk.Advance(2 * time.Minute)
	if _, err := svc.Token(ctx, platform, bob.ID, "github"); err == nil {
		t.Fatal("a lapsed token was handed out")
	}
	h.idle()
	dm := h.s.PostsIn("D-" + bob.ID)
	if last := dm[len(dm)-1].Out.Text; !strings.Contains(last, "lapsed") || !strings.Contains(last, "https://marlowe.example/connect?t=") {
		t.Errorf("bob was told %q", last)
	}
	for _, p := range h.s.PostsIn("C1") {
		if strings.Contains(p.Out.Text, "lapsed") {
			t.Errorf("the channel was told about bob's connection: %q", p.Out.Text)
		}
	}
	if cc := payloads[*core.ConnectionChanged](h, "D-"+bob.ID, core.KindConnectionChanged); len(cc) != 1 || cc[0].Event != core.ConnRefreshFailed {
		t.Fatalf("bob's journal: %+v", cc)
	}

	// The export lists connections, without tokens; `forget me` revokes them.
	export, err := h.e.ExportData(ctx, platform, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ex engine.Export
	if err := json.Unmarshal(export, &ex); err != nil || len(ex.Connections) != 1 || ex.Connections[0].Server != "linear" {
		t.Fatalf("export connections: %+v %v", ex.Connections, err)
	}
	if got := h.sayDM(alice, "what do you know about me"); !strings.Contains(got, "I act as you on `linear`") {
		t.Errorf("about me = %q", got)
	}
	h.sayDM(alice, "forget me")
	var card *core.Card
	for _, c := range h.s.Cards() {
		if c.Ref.Scope.Channel == "D-"+alice.ID {
			card = c.Out.Card
		}
	}
	if card == nil {
		t.Fatal("no forget card")
	}
	h.click(alice, token(card, "erase"), dmScope(alice))
	h.idle()
	if _, ok := h.s.Find("1 connection revoked and deleted"); !ok {
		t.Errorf("the erasure reply does not count the connection: %+v", h.s.PostsIn("D-"+alice.ID))
	}
	if cs, _ := svc.List(ctx, platform, alice.ID); len(cs) != 0 {
		t.Errorf("after forget me alice still has %+v", cs)
	}

	// No token in any journal row, log line, post or export.
	hay := []string{h.logs.String(), string(export)}
	chs, _ := h.j.Channels(ctx)
	for _, ch := range chs {
		for _, c := range h.j.All(ch) {
			b, _ := json.Marshal(c)
			hay = append(hay, string(b), string(c.RawPayload()))
		}
	}
	for _, p := range h.s.Posts() {
		b, _ := json.Marshal(p.Out)
		hay = append(hay, string(b))
	}
	for _, s := range hay {
		if strings.Contains(s, tokenMark) {
			t.Fatalf("token material found: %s", s)
		}
	}
}
