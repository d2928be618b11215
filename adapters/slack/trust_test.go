package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
)

// engineOver runs a real engine (in-memory journal, the intent filter, the
// teammate model) over adapter a talking to f, until the test ends.
func engineOver(t *testing.T, f *slackfake.Server, a *Adapter, logs *logBuffer) (*engine.Engine, *coretest.MemJournal) {
	t.Helper()
	filter := intent.NewFilter(intent.NewMemoryStore(nil), nil)
	journal := coretest.NewMemJournal(coretest.NewSigner(t))
	eng, err := engine.New(engine.Config{
		Journal:  journal,
		Boundary: core.NewBoundary(nil),
		Model:    teammateModel{},
		Surfaces: map[string]core.Surface{Platform: a},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			d, err := filter.Decide(ctx, ev)
			return d.Route, d.Reason.String(), err
		}),
		PostObserver: filter,
		CardKey:      []byte("slack-trust-test-card-key-0123456789"),
		Logger:       logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(context.Background())
	if err := eng.Start(ectx); err != nil {
		t.Fatal(err)
	}
	run(t, a, eng.Deliver) // cleanups run last-in first-out: adapter stops before the engine
	t.Cleanup(func() {
		ecancel()
		_ = eng.Close()
	})
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("no connection")
	}
	return eng, journal
}

func ackAll(t *testing.T, f *slackfake.Server, ids []string) {
	t.Helper()
	for _, id := range ids {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("event %s not acknowledged", id)
		}
	}
}

// Slackbot (USLACKBOT, no bot_id) writing in a DM is a bot, not a person:
// no run starts and nothing is answered. A person's DM right after is.
func TestSlackbotDMStartsNoRun(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	eng, journal := engineOver(t, f, a, logs)

	_, ids := f.Say(chDM, "", slackbotID, "Reminder: submit your timesheet.")
	ackAll(t, f, ids)
	_, ids = f.Say(chDM, "", alice, "hi there")
	ackAll(t, f, ids)
	waitPost(t, f, func(p slackfake.Post) bool { return strings.Contains(p.Text, "Hello.") })
	if err := eng.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := journal.Count(core.KindRunStarted); n != 1 {
		t.Errorf("runs started = %d, want 1 (Alice's DM only)", n)
	}
	if n := journal.Count(core.KindMessageReceived); n != 1 {
		t.Errorf("messages journaled = %d, want 1 (Slackbot's is not a person's)", n)
	}
	for _, p := range f.Posts() {
		if p.Channel != chDM || strings.Contains(p.Text, "timesheet") {
			t.Errorf("post %q in %s", p.Text, p.Channel)
		}
	}
}

// The refusal of a button that does not verify goes to the presser alone
// (chat.postEphemeral in the card's thread), never to the channel.
func TestUnverifiableButtonRefusedEphemerally(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	eng, _ := engineOver(t, f, a, logs)

	root := f.AddMessage(chPublic, "", alice, "please deploy")
	cardTS := f.AddMessage(chPublic, root, f.Config().BotUserID, "card")
	id := f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: chPublic, MessageTS: cardTS, ThreadTS: root, User: bob, UserName: "bob",
		BlockID: "card-42", ActionID: "approve", Value: "forged.token", Label: "Approve",
	}))
	ackAll(t, f, []string{id})
	waitUntil(t, 5*time.Second, "the ephemeral refusal", func() bool { return len(f.Ephemerals()) > 0 })
	if err := eng.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := f.Ephemerals()
	if len(e) != 1 || e[0].User != bob || e[0].Channel != chPublic || e[0].ThreadTS != root || !strings.Contains(e[0].Text, "could not be verified") {
		t.Errorf("ephemerals = %+v; want one refusal to Bob in the card's thread", e)
	}
	if n := f.CallCount("chat.postMessage"); n != 0 {
		t.Errorf("chat.postMessage called %d times: the refusal was public: %+v", n, f.Posts())
	}
}

// tokens_revoked and app_uninstalled are logged as errors and make the
// surface report not ready; a revocation of user tokens only does not.
func TestLifecycleEventsMarkNotReady(t *testing.T) {
	cases := []struct {
		name  string
		event map[string]any
		ready bool
	}{
		{"bot token revoked", map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"bot": []string{"U0FAKEB0T1"}}}, false},
		{"app uninstalled", map[string]any{"type": "app_uninstalled"}, false},
		{"user tokens only", map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"oauth": []string{alice}}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			a, logs := newAdapter(t, testConfig(f, ModeSocket))
			rec := connectSocket(t, f, a, nil)
			if err := a.Ready(); err != nil {
				t.Fatalf("ready before the event: %v", err)
			}
			ackAll(t, f, []string{f.PushEvent(c.event)})
			err := a.Ready()
			if got := err == nil; got != c.ready {
				t.Fatalf("Ready() = %v; want ready=%v", err, c.ready)
			}
			if !c.ready {
				if typ := c.event["type"].(string); !strings.Contains(err.Error(), typ) {
					t.Errorf("Ready() = %v; want it to name %s", err, typ)
				}
				if !strings.Contains(logs.String(), "level=ERROR") {
					t.Errorf("no error logged:\n%s", logs.String())
				}
			}
			if rec.callCount() != 0 {
				t.Errorf("lifecycle event delivered to the engine")
			}
		})
	}
}

// IsAdmin asks users.info: admins, owners and the primary owner administer;
// members, guests, bots and deleted accounts do not. Answers are cached for
// adminTTL per user, so a demotion counts after at most that long.
func TestIsAdminFromUsersInfo(t *testing.T) {
	const (
		admin, owner, primary, member, guest, gone, otherBot = "U0ADMIN001", "U0OWNER001", "U0PRIME001", "U0MEMBE001", "U0GUEST001", "U0GONE0001", "U0OBOT0001"
	)
	f := newFake(t, func(c *slackfake.Config) {
		c.Users = []slackfake.User{
			{ID: admin, Name: "ada", IsAdmin: true},
			{ID: owner, Name: "otto", IsOwner: true},
			{ID: primary, Name: "pia", IsOwner: true, IsPrimaryOwner: true},
			{ID: member, Name: "mo"},
			{ID: guest, Name: "gus", IsAdmin: true, IsRestricted: true},
			{ID: gone, Name: "gone", IsAdmin: true, Deleted: true},
			{ID: otherBot, Name: "robot", IsAdmin: true, IsBot: true},
		}
	})
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	ctx := context.Background()
	scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic}
	want := map[string]bool{admin: true, owner: true, primary: true, member: false, guest: false, gone: false, otherBot: false}
	for id, w := range want {
		got, err := a.IsAdmin(ctx, scope, id)
		if err != nil || got != w {
			t.Errorf("IsAdmin(%s) = %v, %v; want %v", id, got, err, w)
		}
	}
	if _, err := a.IsAdmin(ctx, scope, "U0NOBODY01"); err == nil {
		t.Error("IsAdmin of an unknown user: no error")
	}
	if _, err := a.IsAdmin(ctx, scope, "not an id"); err == nil {
		t.Error("IsAdmin of a malformed id: no error")
	}
	calls := f.CallCount("users.info")

	// Demoted: the cached answer holds until adminTTL has passed.
	f.SetUser(slackfake.User{ID: admin, Name: "ada"})
	if got, _ := a.IsAdmin(ctx, scope, admin); !got || f.CallCount("users.info") != calls {
		t.Errorf("within the TTL: admin = %v, users.info calls %d -> %d; want cached", got, calls, f.CallCount("users.info"))
	}
	now = now.Add(adminTTL)
	if got, err := a.IsAdmin(ctx, scope, admin); got || err != nil {
		t.Errorf("after the TTL: demoted admin = %v, %v; want false", got, err)
	}
	if f.CallCount("users.info") != calls+1 {
		t.Errorf("users.info not asked again after the TTL")
	}
	if _, err := a.IsAdmin(ctx, core.Scope{Platform: "discord", Channel: "1"}, admin); err == nil {
		t.Error("IsAdmin for another platform's scope: no error")
	}
}

// The same over the Events API (http mode).
func TestHTTPLifecycleEventMarksNotReady(t *testing.T) {
	e := newHTTPEnv(t)
	if err := e.a.Ready(); err != nil {
		t.Fatalf("ready before: %v", err)
	}
	body := e.f.EventCallbackJSON("EvRevoke", map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"bot": []string{e.f.Config().BotUserID}}})
	if code, _ := e.post(t, "/slack/events", body, time.Now(), secret, nil); code != 200 {
		t.Fatalf("status %d", code)
	}
	if err := e.a.Ready(); err == nil || !strings.Contains(err.Error(), "tokens_revoked") {
		t.Fatalf("Ready() = %v; want not ready naming tokens_revoked", err)
	}
	if e.rec.callCount() != 0 {
		t.Error("lifecycle event delivered")
	}
}
