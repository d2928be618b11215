package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

func TestPostIsIdempotentByKey(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx := context.Background()
	a := botPost(t, s, "eff-1", "general", "", "hello")
	b := botPost(t, s, "eff-1", "general", "", "hello again, retried")
	if a != b {
		t.Fatalf("same key gave %+v and %+v", a, b)
	}
	c := botPost(t, s, "eff-2", "general", "", "second")
	if c.ID == a.ID {
		t.Fatal("different keys gave the same message")
	}
	if a.Scope != (core.Scope{Platform: "sandbox", Workspace: "local", Channel: "general"}) {
		t.Fatalf("scope %+v", a.Scope)
	}
	hist, err := s.History(ctx, core.Scope{Platform: Platform, Workspace: Workspace, Channel: "general"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Text != "hello" || !hist[0].Author.IsBot {
		t.Fatalf("history %+v", hist)
	}
}

func TestPostValidatesScope(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx := context.Background()
	root := botPost(t, s, "root", "general", "", "root")
	reply := botPost(t, s, "reply", "general", root.ID, "in thread")
	if reply.Scope.Thread != root.ID {
		t.Fatalf("reply scope %+v", reply.Scope)
	}
	for name, sc := range map[string]core.Scope{
		"other platform":   {Platform: "slack", Channel: "general"},
		"unknown channel":  {Platform: Platform, Channel: "nope"},
		"unknown thread":   {Platform: Platform, Channel: "general", Thread: "123.000001"},
		"thread elsewhere": {Platform: Platform, Channel: "random", Thread: root.ID},
		"reply as root":    {Platform: Platform, Channel: "general", Thread: reply.ID},
	} {
		if _, err := s.Post(ctx, core.Outbound{Key: name, Scope: sc, Text: "x"}); err == nil {
			t.Errorf("%s: Post succeeded", name)
		}
	}
	if _, err := s.Post(ctx, core.Outbound{Key: "empty", Scope: root.Scope}); err == nil {
		t.Error("empty post succeeded")
	}
}

func TestUpdateEditsInPlace(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx := context.Background()
	ref := botPost(t, s, "chk", "general", "", "- [ ] read the thread")
	rev := s.msgs[ref.ID].Rev
	if err := s.Update(ctx, ref, core.Outbound{Key: "chk", Text: "- [x] read the thread"}); err != nil {
		t.Fatal(err)
	}
	m := s.msgs[ref.ID]
	if m.Text != "- [x] read the thread" || m.Rev <= rev || m.Edited.IsZero() {
		t.Fatalf("after update: %+v", m)
	}
	rev = m.Rev
	if err := s.Update(ctx, ref, core.Outbound{Text: "- [x] read the thread"}); err != nil {
		t.Fatal(err)
	}
	if s.msgs[ref.ID].Rev != rev {
		t.Error("an update that changes nothing made an event")
	}
	if len(s.msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(s.msgs))
	}
	if err := s.Update(ctx, core.MessageRef{ID: "999.000001"}, core.Outbound{Text: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of unknown message: %v", err)
	}
	person, err := s.say("alice", "general", "", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, core.MessageRef{ID: person.ID}, core.Outbound{Text: "x"}); err == nil {
		t.Error("the bot edited a person's message")
	}
}

func TestReactIsIdempotent(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx := context.Background()
	m, err := s.say("alice", "general", "", "hi")
	if err != nil {
		t.Fatal(err)
	}
	ref := core.MessageRef{Scope: core.Scope{Platform: Platform, Workspace: Workspace, Channel: "general"}, ID: m.ID}
	for _, e := range []string{"eyes", ":eyes:", "eyes", "white_check_mark"} {
		if err := s.React(ctx, ref, e); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.msgs[m.ID].Reactions; !reflect.DeepEqual(got, []string{"eyes", "white_check_mark"}) {
		t.Fatalf("reactions %v", got)
	}
	if err := s.React(ctx, core.MessageRef{ID: "nope"}, "eyes"); !errors.Is(err, ErrNotFound) {
		t.Errorf("react to unknown: %v", err)
	}
}

func TestOpenDM(t *testing.T) {
	s := newSandbox(t, Config{})
	sc, err := s.OpenDM(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if sc != (core.Scope{Platform: Platform, Workspace: Workspace, Channel: "dm-bob"}) {
		t.Fatalf("scope %+v", sc)
	}
	if _, err := s.OpenDM(context.Background(), "mallory"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown person: %v", err)
	}
	id, err := s.Self(context.Background())
	if err != nil || id.UserID != BotID {
		t.Fatalf("Self: %+v %v", id, err)
	}
}

func TestPersistenceKeepsConversationAndKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "sandbox.jsonl")
	clock := newFakeClock()
	s1 := newSandbox(t, Config{DataFile: file, Clock: clock.Now})
	ctx := context.Background()
	m, err := s1.say("alice", "general", "", "<@marlowe> hi")
	if err != nil {
		t.Fatal(err)
	}
	ref := botPost(t, s1, "ans-1", "general", m.ID, "hello Alice")
	if err := s1.Update(ctx, ref, core.Outbound{Text: "hello Alice (edited)"}); err != nil {
		t.Fatal(err)
	}
	seq, epoch := s1.seq, s1.epoch

	s2 := newSandbox(t, Config{DataFile: file, Clock: clock.Now})
	if s2.epoch != epoch || s2.seq != seq {
		t.Fatalf("epoch/seq %s/%d after restart, want %s/%d", s2.epoch, s2.seq, epoch, seq)
	}
	again := botPost(t, s2, "ans-1", "general", m.ID, "hello Alice")
	if again.ID != ref.ID {
		t.Fatalf("key ans-1 posted twice across a restart: %s and %s", ref.ID, again.ID)
	}
	hist, err := s2.History(ctx, core.Scope{Platform: Platform, Channel: "general", Thread: m.ID}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].MessageID != m.ID || hist[1].Text != "hello Alice (edited)" || !hist[1].Author.IsBot {
		t.Fatalf("history after restart %+v", hist)
	}
	if hist[0].Text != "hi" || !hist[0].MentionsBot {
		t.Fatalf("person's message after restart %+v", hist[0])
	}
	n := botPost(t, s2, "ans-2", "general", "", "new")
	if n.ID <= ref.ID {
		t.Fatalf("new id %s not after %s", n.ID, ref.ID)
	}
	if s2.msgs[n.ID].Rev != seq+1 {
		t.Fatalf("revision %d, want %d", s2.msgs[n.ID].Rev, seq+1)
	}
}

func TestPendingMessageIsDeliveredAfterRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sandbox.jsonl")
	s1 := newSandbox(t, Config{DataFile: file})
	m, err := s1.say("bob", "random", "", "stored, never delivered")
	if err != nil {
		t.Fatal(err)
	}
	s2 := newSandbox(t, Config{DataFile: file})
	rec := newRecorder()
	run(t, s2, rec.deliver)
	ev := rec.nextEvent(t)
	if ev.MessageID != m.ID || ev.Text != "stored, never delivered" {
		t.Fatalf("redelivered %+v", ev)
	}
	waitFor(t, func() bool { return s2.message(m.ID).State == stateDelivered })
}

func (s *Sandbox) message(id string) message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.msgs[id]
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

func TestNormalisation(t *testing.T) {
	clock := newFakeClock()
	s := newSandbox(t, Config{Clock: clock.Now})
	rec := newRecorder()
	base := run(t, s, rec.deliver)

	root := say(t, base, "alice", "general", "", "<@marlowe> what's the plan for <@bob> and <!subteam^eng>? <!here> <@nobody> <@bob>")
	ev := rec.nextEvent(t)
	want := core.Event{
		Scope:      core.Scope{Platform: "sandbox", Workspace: "local", Channel: "general"},
		Visibility: core.Public,
		MessageID:  root,
		Author:     core.Person{ID: "alice", Name: "Alice"},
		Text:       "what's the plan for <@bob> and <!subteam^eng>? <!here> <@nobody> <@bob>",
		Mentions: []core.Mention{
			{Kind: core.MentionUser, ID: "bob"},
			{Kind: core.MentionGroup, ID: "eng"},
			{Kind: core.MentionBroadcast, ID: "here"},
		},
		MentionsBot: true,
		At:          s.message(root).At,
	}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("event\n got %+v\nwant %+v", ev, want)
	}
	if ev.At.IsZero() || ev.At.Location() != time.UTC {
		t.Fatalf("At %v not from the clock", ev.At)
	}

	say(t, base, "bob", "general", root, "in the thread, <!channel>")
	ev = rec.nextEvent(t)
	if ev.Scope.Thread != root || ev.MentionsBot || ev.Author.ID != "bob" ||
		!reflect.DeepEqual(ev.Mentions, []core.Mention{{Kind: core.MentionBroadcast, ID: "channel"}}) {
		t.Fatalf("thread reply %+v", ev)
	}

	say(t, base, "bob", "general", "", "hey <@marlowe>, later in the text")
	ev = rec.nextEvent(t)
	if !ev.MentionsBot || ev.Text != "hey <@marlowe>, later in the text" || len(ev.Mentions) != 0 {
		t.Fatalf("mid-text mention %+v", ev)
	}

	say(t, base, "alice", "private-team", "", "private chatter")
	if ev = rec.nextEvent(t); ev.Visibility != core.Private || ev.Scope.Channel != "private-team" {
		t.Fatalf("private %+v", ev)
	}
	say(t, base, "carol", "dm-carol", "", "<@marlowe>: hello")
	if ev = rec.nextEvent(t); ev.Visibility != core.DM || ev.Scope.Channel != "dm-carol" || ev.Text != "hello" || !ev.MentionsBot {
		t.Fatalf("dm %+v", ev)
	}
	if err := ev.Scope.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSayRejects(t *testing.T) {
	s := newSandbox(t, Config{})
	base := run(t, s, newRecorder().deliver)
	root := botPost(t, s, "k", "general", "", "root")
	reply := botPost(t, s, "k2", "general", root.ID, "reply")
	for name, tc := range map[string]struct {
		body map[string]string
		code int
	}{
		"not a member":       {map[string]string{"person": "carol", "channel": "private-team", "text": "hi"}, http.StatusForbidden},
		"someone else's dm":  {map[string]string{"person": "carol", "channel": "dm-alice", "text": "hi"}, http.StatusForbidden},
		"the bot":            {map[string]string{"person": BotID, "channel": "general", "text": "hi"}, http.StatusNotFound},
		"unknown channel":    {map[string]string{"person": "alice", "channel": "nope", "text": "hi"}, http.StatusNotFound},
		"unknown thread":     {map[string]string{"person": "alice", "channel": "general", "thread": "1.000001", "text": "hi"}, http.StatusNotFound},
		"reply is not root":  {map[string]string{"person": "alice", "channel": "general", "thread": reply.ID, "text": "hi"}, http.StatusNotFound},
		"thread in other ch": {map[string]string{"person": "alice", "channel": "random", "thread": root.ID, "text": "hi"}, http.StatusNotFound},
		"empty":              {map[string]string{"person": "alice", "channel": "general", "text": "  \n"}, http.StatusBadRequest},
		"too long":           {map[string]string{"person": "alice", "channel": "general", "text": strings.Repeat("x", maxTextBytes+1)}, http.StatusBadRequest},
	} {
		if code, body := postJSON(t, base+"/api/messages", tc.body); code != tc.code {
			t.Errorf("%s: status %d, want %d (%s)", name, code, tc.code, body)
		}
	}

	// Not JSON: a plain cross-origin form post cannot reach the API.
	resp, err := http.Post(base+"/api/messages", "text/plain", strings.NewReader(`{"person":"alice","channel":"general","text":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: status %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/messages", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site: status %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/api/workspace", nil)
	req.Host = "evil.example:8080"
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("rebinding host: status %d", resp.StatusCode)
	}
}

func TestCardClick(t *testing.T) {
	s := newSandbox(t, Config{})
	rec := newRecorder()
	base := run(t, s, rec.deliver)
	ctx := context.Background()
	root := botPost(t, s, "root", "general", "", "root")
	card := &core.Card{ID: "card-7", Title: "Approve deploy?", Fields: []core.CardField{{Label: "target", Value: "staging"}},
		Actions: []core.CardAction{{ID: "approve", Label: "Approve", Token: "tok-A", Style: "primary"}, {ID: "decline", Label: "Decline", Token: "tok-D", Style: "danger"}}}
	out := core.Outbound{Key: "card", Scope: root.Scope, Card: card, Priority: core.PriorityHigh}
	out.Scope.Thread = root.ID
	ref, err := s.Post(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	card.Title = "mutated by the caller"
	if s.message(ref.ID).Card.Title != "Approve deploy?" {
		t.Fatal("the stored card aliases the caller's")
	}

	code, body := postJSON(t, base+"/api/click", map[string]string{"person": "bob", "message": ref.ID, "action": "approve"})
	if code != http.StatusAccepted {
		t.Fatalf("click: %d %s", code, body)
	}
	in := rec.next(t)
	if in.Click == nil {
		t.Fatalf("delivered %+v, want a click", in)
	}
	c := *in.Click
	if c.Card != "card-7" || c.Action != "approve" || c.Token != "tok-A" || c.By.ID != "bob" || c.By.Name != "Bob" || c.By.IsBot ||
		c.Scope != (core.Scope{Platform: Platform, Workspace: Workspace, Channel: "general", Thread: root.ID}) || c.At.IsZero() {
		t.Fatalf("click %+v", c)
	}

	if code, _ := postJSON(t, base+"/api/click", map[string]string{"person": "bob", "message": ref.ID, "action": "launch"}); code != http.StatusNotFound {
		t.Errorf("unknown action: %d", code)
	}
	if code, _ := postJSON(t, base+"/api/click", map[string]string{"person": "bob", "message": root.ID, "action": "approve"}); code != http.StatusNotFound {
		t.Errorf("message without card: %d", code)
	}
	resolved := *card
	resolved.Title = "Approve deploy?"
	resolved.Resolution = "Approved by Bob"
	if err := s.Update(ctx, ref, core.Outbound{Card: &resolved}); err != nil {
		t.Fatal(err)
	}
	if code, _ := postJSON(t, base+"/api/click", map[string]string{"person": "alice", "message": ref.ID, "action": "approve"}); code != http.StatusConflict {
		t.Errorf("click on resolved card: %d", code)
	}
	select {
	case in := <-rec.ch:
		t.Fatalf("rejected clicks were delivered: %+v", in)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestSSECatchUpWithLastEventID(t *testing.T) {
	s := newSandbox(t, Config{})
	base := run(t, s, func(context.Context, core.Inbound) error { return nil })
	ctx := context.Background()
	a := botPost(t, s, "a", "general", "", "one")
	b := botPost(t, s, "b", "general", "", "two")
	c := botPost(t, s, "c", "random", "", "three")
	if err := s.Update(ctx, b, core.Outbound{Text: "two, edited"}); err != nil {
		t.Fatal(err)
	}
	// Revisions: a=1, b=2 then 4, c=3.

	// A fresh client gets every message once, in revision order.
	ch, stop := stream(t, base, "")
	hello := nextSSE(t, ch)
	if hello.Event != "hello" || !strings.Contains(hello.Data, `"seq":4`) || !strings.Contains(hello.Data, s.epoch) {
		t.Fatalf("hello %+v", hello)
	}
	var got []string
	for range 3 {
		ev := nextSSE(t, ch)
		m := decodeMsg(t, ev)
		if ev.ID != strconv.FormatInt(m.Rev, 10) {
			t.Fatalf("event id %s for rev %d", ev.ID, m.Rev)
		}
		got = append(got, fmt.Sprintf("%s@%d:%s", m.ID, m.Rev, m.Text))
	}
	want := []string{a.ID + "@1:one", c.ID + "@3:three", b.ID + "@4:two, edited"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot\n got %v\nwant %v", got, want)
	}
	noSSE(t, ch, 50*time.Millisecond)
	stop()

	// While the client is away: a new post, a reaction and an edit.
	d := botPost(t, s, "d", "general", "", "four")  // rev 5
	if err := s.React(ctx, a, "eyes"); err != nil { // rev 6
		t.Fatal(err)
	}
	if err := s.Update(ctx, d, core.Outbound{Text: "four, edited"}); err != nil { // rev 7
		t.Fatal(err)
	}

	// Reconnecting with Last-Event-ID 4 catches up: latest states, each once.
	ch, _ = stream(t, base, "4")
	if ev := nextSSE(t, ch); ev.Event != "hello" {
		t.Fatalf("first event %+v", ev)
	}
	m := decodeMsg(t, nextSSE(t, ch))
	if m.ID != a.ID || m.Rev != 6 || !reflect.DeepEqual(m.Reactions, []string{"eyes"}) {
		t.Fatalf("catch-up 1: %+v", m)
	}
	m = decodeMsg(t, nextSSE(t, ch))
	if m.ID != d.ID || m.Rev != 7 || m.Text != "four, edited" {
		t.Fatalf("catch-up 2: %+v", m)
	}
	noSSE(t, ch, 50*time.Millisecond)

	// Then live changes follow, in order.
	e := botPost(t, s, "e", "general", "", "five")
	m = decodeMsg(t, nextSSE(t, ch))
	if m.ID != e.ID || m.Rev != 8 {
		t.Fatalf("live: %+v", m)
	}

	// A Last-Event-ID from another epoch (ahead of this counter) starts over.
	ch, _ = stream(t, base, "999")
	nextSSE(t, ch)
	ids := map[string]bool{}
	for range 5 {
		ids[decodeMsg(t, nextSSE(t, ch)).ID] = true
	}
	if len(ids) != 5 {
		t.Fatalf("after a foreign id: %d distinct messages, want all 5", len(ids))
	}
	noSSE(t, ch, 50*time.Millisecond)
}

func TestDecidedShowsDecision(t *testing.T) {
	s := newSandbox(t, Config{})
	// The engine's router reports its decision from inside deliver.
	deliver := func(_ context.Context, in core.Inbound) error {
		if in.Event.MentionsBot {
			s.Decided(*in.Event, true, "mention")
		} else {
			s.Decided(*in.Event, false, "no-window")
		}
		return nil
	}
	base := run(t, s, deliver)
	ch, _ := stream(t, base, "")
	nextSSE(t, ch) // hello

	id := say(t, base, "bob", "general", "", "lunch anyone?")
	var m message
	for m.State != stateDelivered {
		m = decodeMsg(t, nextSSE(t, ch))
	}
	if m.ID != id || m.Decision == nil || m.Decision.Route || m.Decision.Reason != "no-window" {
		t.Fatalf("message %+v decision %+v", m, m.Decision)
	}
	say(t, base, "alice", "general", "", "<@marlowe> status?")
	waitFor(t, func() bool { return s.message(s.lastID()).State == stateDelivered })
	if d := s.message(s.lastID()).Decision; d == nil || !d.Route || d.Reason != "mention" {
		t.Fatalf("decision %+v", d)
	}

	// Other platforms, bot messages and unknown ids are ignored.
	rev := s.seq
	ref := botPost(t, s, "k", "general", "", "bot")
	s.Decided(core.Event{Scope: core.Scope{Platform: "slack", Channel: "general"}, MessageID: id}, true, "mention")
	s.Decided(core.Event{Scope: ref.Scope, MessageID: ref.ID}, true, "mention")
	s.Decided(core.Event{Scope: ref.Scope, MessageID: "nope"}, true, "mention")
	s.Decided(core.Event{Scope: ref.Scope, MessageID: id}, false, "no-window") // unchanged
	if s.seq != rev+1 {
		t.Fatalf("%d events, want only the bot's post", s.seq-rev)
	}
}

func (s *Sandbox) lastID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := ""
	for id := range s.msgs {
		best = max(best, id)
	}
	return best
}

func TestDeliverFailureIsShown(t *testing.T) {
	s := newSandbox(t, Config{})
	rec := newRecorder()
	rec.err = errors.New("journal unavailable")
	base := run(t, s, rec.deliver)
	id := say(t, base, "alice", "dm-alice", "", "hello?")
	for range 3 {
		rec.nextEvent(t) // retried
	}
	waitFor(t, func() bool { return s.message(id).State == stateFailed })
}

func TestRunEndsOpenStreams(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	url, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("url %s", url)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(context.Context, core.Inbound) error { return nil }) }()
	resp, err := http.Get(url + "api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return with a stream open")
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
	// Nothing the sandbox started is still running.
	all := make([]byte, 1<<20)
	if stacks := string(all[:runtime.Stack(all, true)]); strings.Contains(stacks, "adapters/sandbox.(*Sandbox)") {
		t.Fatalf("sandbox goroutines left after Run returned:\n%s", stacks)
	}
	if err := s.Run(context.Background(), func(context.Context, core.Inbound) error { return nil }); err == nil {
		t.Fatal("second Run succeeded")
	}
}

func TestAddress(t *testing.T) {
	for in, want := range map[string]struct {
		addr     string
		loopback bool
	}{
		"":               {"127.0.0.1:8080", true},
		":9000":          {"127.0.0.1:9000", true},
		"localhost:9000": {"localhost:9000", true},
		"[::1]:9000":     {"[::1]:9000", true},
		"0.0.0.0:9000":   {"0.0.0.0:9000", false},
	} {
		addr, lo, err := resolveAddr(in)
		if err != nil || addr != want.addr || lo != want.loopback {
			t.Errorf("resolveAddr(%q) = %q, %v, %v; want %q, %v", in, addr, lo, err, want.addr, want.loopback)
		}
	}
	if _, err := New(Config{Addr: "no-port"}); err == nil {
		t.Error("bad address accepted")
	}
}

func TestPageIsServed(t *testing.T) {
	s := newSandbox(t, Config{})
	base := run(t, s, func(context.Context, core.Inbound) error { return nil })
	for path, want := range map[string]string{
		"/":                 "Marlowe sandbox",
		"/static/app.js":    "EventSource",
		"/static/style.css": "--accent",
		"/api/workspace":    `"private-team"`,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

func TestScanTokens(t *testing.T) {
	d := newDirectory()
	ms, bot := d.resolveMentions("<@alice> <!subteam^eng> <!subteam^ghosts> <!everyone> <@marlowe> <#general> <@bad id> <@> a<b>c")
	want := []core.Mention{{Kind: core.MentionUser, ID: "alice"}, {Kind: core.MentionGroup, ID: "eng"}, {Kind: core.MentionBroadcast, ID: "everyone"}}
	if !bot || !reflect.DeepEqual(ms, want) {
		t.Fatalf("mentions %+v bot %v", ms, bot)
	}
	if ms, bot := d.resolveMentions("Marlowe, @Marlowe, @alice"); bot || ms != nil {
		t.Fatalf("names matched: %+v %v", ms, bot)
	}
	for in, want := range map[string]string{
		"<@marlowe> hi":        "hi",
		"  <@marlowe>, hi":     "hi",
		"<@marlowe>:\nhi":      "hi",
		"hi <@marlowe>":        "hi <@marlowe>",
		"<@marlowex> hi":       "<@marlowex> hi",
		"<@alice> <@marlowe>x": "<@alice> <@marlowe>x",
	} {
		if got := stripBotMention(in, BotID); got != want {
			t.Errorf("strip(%q) = %q, want %q", in, got, want)
		}
	}
}
