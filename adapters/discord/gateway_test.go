package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// IDENTIFY must ask for the message intents explicitly: without
// MESSAGE_CONTENT untagged follow-ups arrive empty and are silently lost.
func TestIdentifyRequestsMessageIntents(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	startAdapter(t, f, newRecorder().deliver)
	ids := f.Identifies()
	if len(ids) != 1 {
		t.Fatalf("%d IDENTIFYs, want 1", len(ids))
	}
	for name, bit := range map[string]discordgo.Intent{
		"GUILDS": discordgo.IntentsGuilds, "GUILD_MESSAGES": discordgo.IntentsGuildMessages,
		"DIRECT_MESSAGES": discordgo.IntentsDirectMessages, "MESSAGE_CONTENT": discordgo.IntentsMessageContent,
	} {
		if ids[0].Intents&int(bit) == 0 {
			t.Errorf("IDENTIFY intents %b lack %s", ids[0].Intents, name)
		}
	}
	if ids[0].Token != "Bot test-token" && ids[0].Token != "test-token" {
		t.Errorf("IDENTIFY token %q", ids[0].Token)
	}
}

// A wrong token fails Run loudly instead of leaving a silent bot.
func TestWrongTokenFailsRun(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a, err := New(Config{BotToken: "wrong", APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(t.Context(), newRecorder().deliver); err == nil {
		t.Fatal("Run with a rejected token returned nil")
	}
}

// After op 7, a dropped socket or a resumable INVALID_SESSION the session
// RESUMEs at resume_gateway_url with its session id and last sequence, and
// every message — before, during the gap, after — is delivered exactly
// once, in order, even when Discord's replay overlaps what was delivered.
func TestResumeLosesAndDoublesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(f *discordfake.Server)
	}{
		{"reconnect op 7", (*discordfake.Server).Reconnect},
		{"dropped socket", (*discordfake.Server).Drop},
		{"resumable invalid session", func(f *discordfake.Server) { f.InvalidSession(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, discordfake.Config{ReplayOverlap: 3})
			rec := newRecorder()
			startAdapter(t, f, rec.deliver)
			say := func(i int) { f.Say(discordfake.Msg{Channel: general, Author: alice, Content: fmt.Sprintf("m%d", i)}) }
			say(1)
			say(2)
			rec.waitFor(t, "m1, m2", func() bool { return len(rec.events()) == 2 })

			tc.break_(f)
			say(3) // dispatched while the client is away: replayed on resume
			say(4)
			if !f.Wait(10*time.Second, func() bool {
				rs := f.ResumesLocked()
				return len(rs) > 0 && rs[len(rs)-1].Accepted
			}) {
				t.Fatalf("no accepted RESUME; resumes %+v identifies %+v", f.Resumes(), f.Identifies())
			}
			say(5)
			rec.waitFor(t, "m1..m5", func() bool { return len(rec.events()) >= 5 })

			r := f.Resumes()[len(f.Resumes())-1]
			if r.Path != "/resume" {
				t.Errorf("resumed at %s, want the resume_gateway_url (/resume)", r.Path)
			}
			if r.Replayed < 2 {
				t.Errorf("replayed %d events, want the 2 sent during the gap (and the overlap)", r.Replayed)
			}
			if n := len(f.Identifies()); n != 1 {
				t.Errorf("%d IDENTIFYs: the session was not resumed", n)
			}
			f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "last"})
			rec.waitFor(t, "last", func() bool { _, ok := rec.eventByText("last"); return ok })
			var got []string
			for _, e := range rec.events() {
				got = append(got, e.Text)
			}
			want := []string{"m1", "m2", "m3", "m4", "m5", "last"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("delivered %v, want %v exactly once each", got, want)
			}
		})
	}
}

// A non-resumable INVALID_SESSION identifies afresh (at the gateway URL from
// GET gateway/bot) and keeps receiving.
func TestInvalidSessionIdentifiesAgain(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	f.InvalidSession(false)
	if !f.Wait(10*time.Second, func() bool { return len(f.IdentifiesLocked()) == 2 && f.ConnectedLocked() }) {
		t.Fatalf("no second IDENTIFY: %+v", f.Identifies())
	}
	if p := f.Identifies()[1].Path; p != "/gateway" {
		t.Errorf("re-identified at %s, want /gateway", p)
	}
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "after"})
	rec.waitFor(t, "after", func() bool { _, ok := rec.eventByText("after"); return ok })
}

// A READY without resume_gateway_url (a captured v6 one) leaves the session
// resumable at the URL it connected to: after a captured op 7 the client
// RESUMEs there rather than IDENTIFYing again, so a DM sent while it was
// away is replayed and delivered.
func TestResumeWithoutResumeGatewayURL(t *testing.T) {
	ready := payload(t, "dgd-ready-v6.json")
	var r struct {
		D struct {
			User             discordfake.User `json:"user"`
			ResumeGatewayURL *string          `json:"resume_gateway_url"`
		} `json:"d"`
	}
	if err := json.Unmarshal(ready, &r); err != nil || r.D.User.ID == "" || r.D.ResumeGatewayURL != nil {
		t.Fatalf("captured READY: %v %+v (want a bot user and no resume_gateway_url)", err, r.D)
	}
	// The fake's bot is the captured READY's user.
	f := newFake(t, discordfake.Config{Bot: r.D.User, Ready: ready})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	f.Say(discordfake.Msg{Channel: "400000000000000001", Author: alice, Content: "before"})
	rec.waitFor(t, "before", func() bool { _, ok := rec.eventByText("before"); return ok })

	f.SendFrame(payload(t, "d4j-reconnect.json"))
	f.Say(discordfake.Msg{Channel: "400000000000000001", Author: alice, Content: "sent during the reconnect"})
	rec.waitFor(t, "the DM sent during the reconnect", func() bool {
		_, ok := rec.eventByText("sent during the reconnect")
		return ok
	})
	if ev, _ := rec.eventByText("sent during the reconnect"); ev.Visibility != core.DM {
		t.Errorf("the DM was delivered as %s", ev.Visibility)
	}
	if n := len(f.Identifies()); n != 1 {
		t.Errorf("%d IDENTIFYs: the session was not resumed", n)
	}
	rs := f.Resumes()
	if len(rs) != 1 || !rs[0].Accepted || rs[0].Path != "/gateway" {
		t.Errorf("resumes %+v, want one accepted at the URL the session connected to (/gateway)", rs)
	}
}

// A close code that forbids resuming (4007 invalid seq, 4009 session timed
// out) is followed by a fresh IDENTIFY, not a RESUME Discord would refuse;
// other closes RESUME.
func TestCloseCodesThatForbidResumeIdentify(t *testing.T) {
	for _, tc := range []struct {
		code   int
		resume bool
	}{{4009, false}, {4007, false}, {4000, true}, {4008, true}} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			f := newFake(t, discordfake.Config{})
			rec := newRecorder()
			startAdapter(t, f, rec.deliver)
			f.CloseWith(tc.code, "closed by the test")
			if !f.Wait(10*time.Second, func() bool {
				return (len(f.IdentifiesLocked()) == 2 || len(f.ResumesLocked()) == 1) && f.ConnectedLocked()
			}) {
				t.Fatalf("not reconnected: identifies %+v resumes %+v", f.Identifies(), f.Resumes())
			}
			if tc.resume {
				if rs := f.Resumes(); len(rs) != 1 || !rs[0].Accepted || len(f.Identifies()) != 1 {
					t.Fatalf("close %d: resumes %+v identifies %d, want one accepted RESUME", tc.code, rs, len(f.Identifies()))
				}
			} else if rs := f.Resumes(); len(rs) != 0 || len(f.Identifies()) != 2 {
				t.Fatalf("close %d: resumes %+v identifies %d, want a fresh IDENTIFY and no RESUME", tc.code, rs, len(f.Identifies()))
			}
			f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "after"})
			rec.waitFor(t, "after", func() bool { _, ok := rec.eventByText("after"); return ok })
		})
	}
}

// A delivery stuck in one channel (a slow first append) holds back that
// channel's later messages only; another channel's message is delivered
// meanwhile. The extra channel is one that eight fixed shards by FNV-1a put
// with general, as the adapter once had.
func TestStuckChannelDelaysNoOtherChannel(t *testing.T) {
	const sameShard = "300000000000000032"
	g := testGuild()
	g.Channels = append(g.Channels, discordfake.Channel{ID: sameShard, Type: discordfake.TypeText, Name: "same-shard"})
	f := newFake(t, discordfake.Config{Guilds: []discordfake.Guild{g}})
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	rec := newRecorder()
	startAdapter(t, f, func(ctx context.Context, in core.Inbound) error {
		if in.Event != nil && in.Event.Text == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return rec.deliver(ctx, in)
	})
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "stuck"})
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "behind it"})
	f.Say(discordfake.Msg{Channel: sameShard, Author: bob, Content: "elsewhere"})
	rec.waitFor(t, "the other channel's message", func() bool { _, ok := rec.eventByText("elsewhere"); return ok })
	if _, ok := rec.eventByText("behind it"); ok {
		t.Fatal("the stuck channel's next message was delivered before the one ahead of it")
	}
	once.Do(func() { close(release) })
	rec.waitFor(t, "the stuck channel's messages", func() bool { _, ok := rec.eventByText("behind it"); return ok })
	var order []string
	for _, ev := range rec.events() {
		if ev.Scope.Channel == general {
			order = append(order, ev.Text)
		}
	}
	if fmt.Sprint(order) != "[stuck behind it]" {
		t.Fatalf("general delivered %q, want [stuck behind it]", order)
	}
}

// SIGTERM with messages queued: Run, told to stop, still delivers every
// message its lanes hold (Discord never sends a gateway event again), then
// returns. The first message's delivery is held until Run has begun to
// stop, with four more of the same channel queued behind it. The old lanes
// skipped whatever was queued once Run's context ended.
func TestStopDeliversEveryQueuedMessage(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	gate, entered := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	got := map[string]int{}
	deliver := func(_ context.Context, in core.Inbound) error {
		if in.Event == nil {
			return nil
		}
		if in.Event.Text == "m0" {
			close(entered)
			<-gate
		}
		mu.Lock()
		got[in.Event.Text]++
		mu.Unlock()
		return nil
	}
	a, err := New(Config{BotToken: "test-token", APIURL: f.APIURL()}, WithLogger(discardLog()), WithChannelPace(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, deliver) }()
	if !f.WaitConnected(10 * time.Second) {
		t.Fatal("never connected")
	}
	for i := range 5 {
		f.Say(discordfake.Msg{Channel: general, Author: alice, Content: fmt.Sprintf("m%d", i)})
	}
	<-entered
	for { // the other four queued behind m0 in the channel's lane
		a.runMu.RLock()
		n := a.queue.Len()
		a.runMu.RUnlock()
		if n == 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	a.runMu.RLock()
	stop := a.stop
	a.runMu.RUnlock()
	cancel() // SIGTERM: intake ends
	<-stop   // Run is stopping
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for i := range 5 {
		if n := got[fmt.Sprintf("m%d", i)]; n != 1 {
			t.Errorf("m%d delivered %d times, want once (delivered: %v)", i, n, got)
		}
	}
}
