package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// The /marlowe application command against the fake: registered at start,
// deferred at once, answered once through the interaction, by the person
// Discord says used it.

// TestSlashCommandRegisteredAtStart: Run bulk-overwrites the global
// commands with /marlowe and its four subcommands; a restart overwrites
// the same list again (one command, same id), never a second one.
func TestSlashCommandRegisteredAtStart(t *testing.T) {
	f := newFake(t, discordfake.Config{MultiSession: true})
	startAdapter(t, f, newRecorder().deliver)
	cmds := f.Commands()
	if len(cmds) != 1 || cmds[0].Name != CommandName {
		t.Fatalf("registered %+v, want only %q", cmds, CommandName)
	}
	var opts []discordgo.ApplicationCommandOption
	if err := json.Unmarshal(cmds[0].Options, &opts); err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, o := range opts {
		if o.Type != discordgo.ApplicationCommandOptionSubCommand {
			t.Errorf("option %q is type %d, want a subcommand", o.Name, o.Type)
		}
		subs = append(subs, o.Name)
		if o.Name == SubAsk && (len(o.Options) != 1 || o.Options[0].Name != "task" ||
			o.Options[0].Type != discordgo.ApplicationCommandOptionString || !o.Options[0].Required) {
			t.Errorf("ask's options %+v, want one required string option task", o.Options)
		}
	}
	if got := strings.Join(subs, ","); got != "ask,inbox,routines,status" {
		t.Errorf("subcommands %s, want ask,inbox,routines,status", got)
	}
	if ctx := cmds[0].Contexts; len(ctx) != 2 {
		t.Errorf("contexts %v, want guild and bot DM", ctx)
	}

	startAdapter(t, f, newRecorder().deliver) // a restart (another replica)
	if !f.Wait(10*time.Second, func() bool { return f.LiveSessionsLocked() == 2 }) {
		t.Fatal("the second session never connected")
	}
	again := f.Commands()
	if len(again) != 1 || again[0].ID != cmds[0].ID {
		t.Errorf("after a second start: %+v, want the same one command", again)
	}
	if !f.Wait(10*time.Second, func() bool { return f.CommandPutsLocked() == 2 && f.LiveSessionsLocked() == 2 }) {
		t.Errorf("%d bulk overwrites, want 2", f.CommandPutsLocked())
	}
}

// slowJournal is a deliver func that holds every delivery until released,
// as a loaded journal would.
type slowJournal struct {
	*recorder
	release chan struct{}
}

func (s slowJournal) deliver(ctx context.Context, in core.Inbound) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.recorder.deliver(ctx, in)
}

// answerOf posts what the engine would post as the run's answer to ev.
func answerOf(ev core.Event, key, text string) core.Outbound {
	scope := ev.Scope
	if scope.Thread == "" && ev.Visibility != core.DM {
		scope.Thread = ev.MessageID
	}
	return core.Outbound{Key: key, Scope: scope, Text: text, Priority: core.PriorityHigh, Answering: ev.MessageID}
}

// TestSlashAskDeferredAtOnceUnderLoadThenAnsweredOnce: 40 uses of
// /marlowe ask at once while the journal is slow are all deferred (type 5)
// within Discord's 3 s, before any is delivered; each becomes a message
// addressed to the bot whose id is its response's; its answer edits that
// response, once, and a re-issued answer (after a crash) edits it again
// instead of posting a second message, while a second answer goes to the
// thread.
func TestSlashAskDeferredAtOnceUnderLoadThenAnsweredOnce(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	j := slowJournal{recorder: newRecorder(), release: make(chan struct{})}
	a := startAdapter(t, f, j.deliver)
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			ids[k] = f.Slash(discordfake.Slash{Channel: general, User: alice, Sub: SubAsk, Options: map[string]string{"task": fmt.Sprintf("task %02d", k)}})
		})
	}
	wg.Wait()
	if !f.Wait(10*time.Second, func() bool { return len(f.CallbacksLocked()) == n }) {
		t.Fatalf("%d of %d interactions answered", len(f.Callbacks()), n)
	}
	for _, cb := range f.Callbacks() {
		if cb.Type != int(discordgo.InteractionResponseDeferredChannelMessageWithSource) || cb.Flags&discordfake.FlagEphemeral != 0 {
			t.Errorf("interaction %s answered with type %d flags %d, want a public deferral (5)", cb.InteractionID, cb.Type, cb.Flags)
		}
		if cb.Latency >= 3*time.Second {
			t.Errorf("interaction %s deferred after %v, past Discord's 3 s", cb.InteractionID, cb.Latency)
		}
	}
	if got := len(j.events()); got != 0 {
		t.Fatalf("%d delivered before the journal let any through; the deferral must not wait for it", got)
	}
	close(j.release)
	j.waitFor(t, "every ask", func() bool { return len(j.events()) == n })

	byMsg := map[string]core.Event{}
	for _, ev := range j.events() {
		if !ev.MentionsBot || ev.Author.ID != alice.ID || !strings.HasPrefix(ev.Text, "task ") || ev.Scope.Channel != general || ev.Visibility != core.Public {
			t.Errorf("delivered %+v, want alice's task addressed to the bot in general", ev)
		}
		byMsg[ev.MessageID] = ev
	}
	ctx := context.Background()
	for k, id := range ids {
		orig := f.Original(id)
		if orig == nil || orig.Flags&discordfake.FlagLoading == 0 {
			t.Fatalf("interaction %s has no deferred response: %+v", id, orig)
		}
		ev, ok := byMsg[orig.ID]
		if !ok {
			t.Fatalf("no delivered message has the id of interaction %s's response %s", id, orig.ID)
		}
		if ev.Text != fmt.Sprintf("task %02d", k) {
			t.Errorf("response %s carries %q, want task %02d", orig.ID, ev.Text, k)
		}
		out := answerOf(ev, "answer-"+id, "answer to "+ev.Text)
		ref, err := a.Post(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		if ref.ID != orig.ID {
			t.Errorf("answer ref %s, want the response %s", ref.ID, orig.ID)
		}
		out.Resumed = true
		if _, err := a.Post(ctx, out); err != nil { // re-issued after a crash
			t.Fatal(err)
		}
	}
	if posts := f.Posts(); len(posts) != 0 {
		t.Errorf("%d channel messages posted, want every answer in its interaction's response: %+v", len(posts), posts[0])
	}
	for k, id := range ids {
		orig := f.Original(id)
		if want := fmt.Sprintf("answer to task %02d", k); orig.Content != want || orig.Flags&discordfake.FlagLoading != 0 {
			t.Errorf("response of %s reads %q (flags %d), want %q, finished", id, orig.Content, orig.Flags, want)
		}
	}
	var newMessages int
	for _, fu := range f.Followups() {
		if !fu.Original {
			newMessages++
		}
	}
	if newMessages != 0 {
		t.Errorf("%d follow-up messages created, want none (the answer is the response)", newMessages)
	}

	// A second answer to the same message (a later notice) must not
	// overwrite the first: it goes to the thread on the response.
	ev := byMsg[f.Original(ids[0]).ID]
	if _, err := a.Post(ctx, answerOf(ev, "notice-"+ids[0], "later notice")); err != nil {
		t.Fatal(err)
	}
	if got := f.Original(ids[0]).Content; got != "answer to task 00" {
		t.Errorf("the response now reads %q: a second answer replaced the first", got)
	}
	posts := f.Posts()
	if len(posts) != 1 || posts[0].Content != "later notice" || f.ChannelOf(posts[0].ID) != ev.MessageID {
		t.Errorf("posts %+v, want the notice in the thread on the response %s", posts, ev.MessageID)
	}
}

// TestSlashInboxIsEphemeralAndPersonal: /marlowe inbox is deferred
// ephemerally, is bob's own `inbox`, and its answer stays in the ephemeral
// response (nothing in the channel, no reaction on it).
func TestSlashInboxIsEphemeralAndPersonal(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	id := f.Slash(discordfake.Slash{Channel: general, User: bob, Sub: SubInbox})
	rec.waitFor(t, "the inbox command", func() bool { return len(rec.events()) == 1 })
	cbs := f.Callbacks()
	if len(cbs) != 1 || cbs[0].Type != 5 || cbs[0].Flags&discordfake.FlagEphemeral == 0 {
		t.Fatalf("callbacks %+v, want one ephemeral deferral", cbs)
	}
	ev := rec.events()[0]
	if ev.Text != "inbox" || ev.Author.ID != bob.ID || !ev.MentionsBot {
		t.Fatalf("delivered %+v, want bob's inbox addressed to the bot", ev)
	}
	ctx := context.Background()
	if err := a.React(ctx, core.MessageRef{Scope: ev.Scope, ID: ev.MessageID}, core.AckReaction); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(ctx, answerOf(ev, "inbox-answer", "📬 Nothing waits for you.")); err != nil {
		t.Fatal(err)
	}
	orig := f.Original(id)
	if orig.Content != "📬 Nothing waits for you." || orig.Flags&discordfake.FlagEphemeral == 0 {
		t.Errorf("response %+v, want the answer in the ephemeral response", orig)
	}
	if p, r := f.Posts(), f.Reactions(); len(p) != 0 || len(r) != 0 {
		t.Errorf("posts %+v reactions %+v in the channel, want none", p, r)
	}
	if f.ChannelOf(orig.ID) != "" {
		t.Errorf("the ephemeral response is stored in channel %s", f.ChannelOf(orig.ID))
	}
}

// TestSlashActorIsTheInvoker: the author is the interaction's member.user,
// whatever an option or a stray top-level user says; a bot's use is
// refused ephemerally and reaches nobody.
func TestSlashActorIsTheInvoker(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	f.Slash(discordfake.Slash{Channel: general, User: bob, Sub: SubAsk, AlsoUser: &alice,
		Options: map[string]string{"task": "approve the payout", "user": alice.ID, "as": alice.ID, "author": alice.ID}})
	rec.waitFor(t, "bob's ask", func() bool { return len(rec.events()) == 1 })
	if ev := rec.events()[0]; ev.Author.ID != bob.ID || ev.Text != "approve the payout" {
		t.Errorf("delivered %+v, want bob's own message with only the task's text", ev)
	}

	id := f.Slash(discordfake.Slash{Channel: general, User: otherBot, Sub: SubAsk, Options: map[string]string{"task": "hi"}})
	if !f.Wait(5*time.Second, func() bool {
		for _, cb := range f.CallbacksLocked() {
			if cb.InteractionID == id {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the bot's interaction was never answered")
	}
	for _, cb := range f.Callbacks() {
		if cb.InteractionID == id && (cb.Type != 4 || cb.Flags&discordfake.FlagEphemeral == 0) {
			t.Errorf("bot's use answered %+v, want an ephemeral refusal", cb)
		}
	}
	if f.Original(id) != nil && f.Original(id).Flags&discordfake.FlagLoading != 0 {
		t.Error("the bot's use was deferred")
	}
	if n := len(rec.events()); n != 1 {
		t.Errorf("%d deliveries, want only bob's", n)
	}
}

// TestSlashAnsweredByAnotherReplicaAfterTheDeferringOneDied: replica A
// defers the command, records the interaction and delivers, then dies
// before the answer; replica B, sharing the records as replicas share
// Redis, posts the run's answer into the same response, once. A replica
// without the shared record could only post a thread message, which is
// what the check on B's path rules out.
func TestSlashAnsweredByAnotherReplicaAfterTheDeferringOneDied(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	shared := newMemInteractions(time.Now)
	rec := newRecorder()
	ctxA, killA := context.WithCancel(context.Background())
	a, err := New(Config{BotToken: "test-token", APIURL: f.APIURL()}, WithInteractions(shared), WithChannelPace(0, 1), WithLogger(discardLog()))
	if err != nil {
		t.Fatal(err)
	}
	doneA := make(chan error, 1)
	go func() { doneA <- a.Run(ctxA, rec.deliver) }()
	t.Cleanup(killA)
	if !f.WaitConnected(10 * time.Second) {
		t.Fatal("replica A never connected")
	}
	id := f.Slash(discordfake.Slash{Channel: general, User: alice, Sub: SubAsk, Options: map[string]string{"task": "summarise #general"}})
	rec.waitFor(t, "the ask", func() bool { return len(rec.events()) == 1 })
	killA()
	if err := <-doneA; err != nil {
		t.Fatalf("replica A: %v", err)
	}

	b := startAdapter(t, f, newRecorder().deliver, WithInteractions(shared))
	if !f.Wait(10*time.Second, func() bool { return len(f.IdentifiesLocked()) == 2 && f.ConnectedLocked() }) {
		t.Fatal("replica B never connected")
	}
	ev := rec.events()[0]
	out := answerOf(ev, "answer", "Here is the summary.")
	out.Resumed = true
	if _, err := b.Post(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	if got := f.Original(id); got == nil || got.Content != "Here is the summary." || got.Flags&discordfake.FlagLoading != 0 {
		t.Errorf("response %+v, want B's answer in it", got)
	}
	if p := f.Posts(); len(p) != 0 {
		t.Errorf("B posted %+v in the channel, want the answer only in the response", p)
	}
	if cbs := f.Callbacks(); len(cbs) != 1 {
		t.Errorf("%d initial responses, want 1", len(cbs))
	}

	// Without the record (a replica that does not share it, or a Redis
	// that lost it) a public ask's next answer goes to the thread on the
	// response: not lost, and the response keeps its answer.
	c := startAdapter(t, f, newRecorder().deliver)
	if !f.Wait(10*time.Second, func() bool { return len(f.IdentifiesLocked()) == 3 && f.ConnectedLocked() }) {
		t.Fatal("replica C never connected")
	}
	if _, err := c.Post(context.Background(), answerOf(ev, "notice", "A later notice.")); err != nil {
		t.Fatal(err)
	}
	if p := f.Posts(); len(p) != 1 || f.ChannelOf(p[0].ID) != ev.MessageID {
		t.Errorf("posts %+v, want the notice in the thread on the response %s", p, ev.MessageID)
	}
	if got := f.Original(id).Content; got != "Here is the summary." {
		t.Errorf("response now reads %q", got)
	}
}

// TestSlashSubcommandsAreTheChatCommands: each subcommand reaches the
// engine as the text a person would type after the mention, deferred
// ephemerally only where the answer is personal (inbox); a use without a
// task is refused ephemerally and delivered nowhere.
func TestSlashSubcommandsAreTheChatCommands(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	cases := []struct {
		sub, text string
		ephemeral bool
	}{{SubInbox, "inbox", true}, {SubRoutines, "routines", false}, {SubStatus, "status", false}}
	for k, c := range cases {
		id := f.Slash(discordfake.Slash{Channel: ops, User: carol, Sub: c.sub})
		rec.waitFor(t, c.sub, func() bool { return len(rec.events()) == k+1 })
		if ev := rec.events()[k]; ev.Text != c.text || !ev.MentionsBot || ev.Author.ID != carol.ID {
			t.Errorf("/marlowe %s delivered %+v, want carol's %q to the bot", c.sub, ev, c.text)
		}
		for _, cb := range f.Callbacks() {
			if cb.InteractionID == id && (cb.Type != 5 || (cb.Flags&discordfake.FlagEphemeral != 0) != c.ephemeral) {
				t.Errorf("/marlowe %s deferred %+v, want type 5, ephemeral %v", c.sub, cb, c.ephemeral)
			}
		}
	}
	id := f.Slash(discordfake.Slash{Channel: ops, User: carol, Sub: SubAsk, Options: map[string]string{"task": "   "}})
	if !f.Wait(5*time.Second, func() bool { return len(f.CallbacksLocked()) == len(cases)+1 }) {
		t.Fatal("the empty ask was never answered")
	}
	if cb := f.Callbacks()[len(cases)]; cb.InteractionID != id || cb.Type != 4 || cb.Flags&discordfake.FlagEphemeral == 0 {
		t.Errorf("empty ask answered %+v, want an ephemeral usage note", cb)
	}
	if n := len(rec.events()); n != len(cases) {
		t.Errorf("%d deliveries, want %d (the empty ask is not one)", n, len(cases))
	}
}

// TestSlashOverTheHTTPEndpoint: a signed /marlowe ask POSTed to
// /discord/interactions is deferred in the response body (type 5), then
// delivered with the response's id and answered by editing that response;
// an unsigned one is refused with 401 and reaches nobody.
func TestSlashOverTheHTTPEndpoint(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapterConfig(t, f, Config{PublicKey: hex.EncodeToString(pub)}, rec.deliver)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	post := func(body []byte, sign bool) *http.Response {
		t.Helper()
		key := priv
		if !sign {
			key = nil
		}
		return postInteraction(t, srv.URL, body, key, strconv.FormatInt(time.Now().Unix(), 10))
	}
	_, forged := f.SlashPayload(discordfake.Slash{Channel: general, User: alice, Sub: SubAsk, Options: map[string]string{"task": "unsigned"}})
	if res := post(forged, false); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned interaction: %d, want 401", res.StatusCode)
	}
	id, body := f.SlashPayload(discordfake.Slash{Channel: general, User: alice, Sub: SubAsk, Options: map[string]string{"task": "over http"}})
	res := post(body, true)
	var resp struct {
		Type int `json:"type"`
		Data struct {
			Flags int `json:"flags"`
		} `json:"data"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&resp) != nil || resp.Type != 5 {
		t.Fatalf("signed ask: %d %+v, want a type 5 body", res.StatusCode, resp)
	}
	f.Responded(id, resp.Type, resp.Data.Flags)
	rec.waitFor(t, "the ask", func() bool { return len(rec.events()) == 1 })
	ev := rec.events()[0]
	if ev.Text != "over http" || ev.Author.ID != alice.ID || ev.MessageID != f.Original(id).ID {
		t.Fatalf("delivered %+v, want alice's ask with the response's id %s", ev, f.Original(id).ID)
	}
	if _, err := a.Post(context.Background(), answerOf(ev, "http-answer", "Answered.")); err != nil {
		t.Fatal(err)
	}
	if got := f.Original(id).Content; got != "Answered." {
		t.Errorf("response reads %q, want the answer", got)
	}
}

// TestSlashLongAnswerContinuesInTheThread: an answer over 2,000 characters
// fills the response with its first part; the rest is one keyed post in
// the thread on the response, and re-issuing the answer doubles neither.
func TestSlashLongAnswerContinuesInTheThread(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	id := f.Slash(discordfake.Slash{Channel: general, User: alice, Sub: SubAsk, Options: map[string]string{"task": "write a lot"}})
	rec.waitFor(t, "the ask", func() bool { return len(rec.events()) == 1 })
	ev := rec.events()[0]
	long := strings.Repeat("word ", 500) + "END"
	for range 2 {
		if _, err := a.Post(context.Background(), answerOf(ev, "long", long)); err != nil {
			t.Fatal(err)
		}
	}
	orig := f.Original(id)
	posts := f.Posts()
	if len(posts) != 1 || f.ChannelOf(posts[0].ID) != ev.MessageID || !strings.HasSuffix(posts[0].Content, "END") {
		t.Fatalf("posts %+v, want the rest once in the thread on %s", posts, ev.MessageID)
	}
	if got := strings.Count(orig.Content+" "+posts[0].Content, "word"); got != 500 || utf16Len(orig.Content) > 2000 {
		t.Errorf("response (%d chars) and rest carry %d words, want all 500 once", utf16Len(orig.Content), got)
	}

	// An ephemeral response has no thread to continue in: it is cut.
	eid := f.Slash(discordfake.Slash{Channel: general, User: alice, Sub: SubInbox})
	rec.waitFor(t, "the inbox", func() bool { return len(rec.events()) == 2 })
	if _, err := a.Post(context.Background(), answerOf(rec.events()[1], "long-inbox", long)); err != nil {
		t.Fatal(err)
	}
	if got := f.Original(eid).Content; utf16Len(got) > 2000 || !strings.HasPrefix(got, "word ") {
		t.Errorf("ephemeral response holds %d chars, want the first part only", utf16Len(got))
	}
	if n := len(f.Posts()); n != 1 {
		t.Errorf("%d channel posts, want still 1: the ephemeral answer's rest goes nowhere public", n)
	}
}

// A private answer longer than one message (a long /marlowe inbox): the
// first part is the ephemeral response, the rest ephemeral follow-ups on
// the same interaction, nothing in the channel, and no line lost. The old
// code kept the first part only and reported success.
func TestSlashLongEphemeralAnswerIsSentWhole(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	id := f.Slash(discordfake.Slash{Channel: general, User: bob, Sub: SubInbox})
	rec.waitFor(t, "the inbox command", func() bool { return len(rec.events()) == 1 })
	var lines []string
	for i := range 120 {
		lines = append(lines, fmt.Sprintf("• item %03d waits for your decision in #general", i))
	}
	text := strings.Join(lines, "\n")
	if len(text) <= 4000 {
		t.Fatal("the test needs an answer longer than two messages")
	}
	if _, err := a.Post(context.Background(), answerOf(rec.events()[0], "inbox-long", text)); err != nil {
		t.Fatal(err)
	}
	got := f.Original(id).Content
	for _, fu := range f.Followups() {
		if fu.InteractionID == id && !fu.Original {
			if fu.Flags&discordfake.FlagEphemeral == 0 {
				t.Errorf("follow-up %q is not ephemeral", fu.Content)
			}
			got += "\n" + fu.Content
		}
	}
	for _, l := range lines {
		if strings.Count(got, l) != 1 {
			t.Fatalf("line %q appears %d times in the private answer", l, strings.Count(got, l))
		}
	}
	if p := f.Posts(); len(p) != 0 {
		t.Errorf("%d posts in the channel, want none", len(p))
	}
}
