package discord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

// Discord buckets each route on its own: reactions and typing never take
// from the channel's message budget. Five questions in a thread at once
// (the channel's burst), each answered with a 👀, typing and the answer,
// at the default pace (1/s, burst 5): every answer goes without waiting on
// the (stopped) fake clock, and the reactions over their own budget are
// dropped. The old pacer queued the 👀 with the answers, and the sixth call
// of the thread waited for a token that, on a stopped clock, never came.
func TestDiscordAnswersTakeNoBudgetFromDecorations(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a, clock := stoppedPace(t, f)
	ctx := t.Context()
	withoutPacingWait(t, func() error {
		for i := range 5 {
			id := f.Say(discordfake.Msg{Channel: oldThread, Author: alice, Content: fmt.Sprint("question ", i)})
			sc := scopeOf(general, oldThread)
			if err := a.React(ctx, core.MessageRef{Scope: sc, ID: id}, "eyes"); err != nil {
				return err
			}
			if err := a.Typing(ctx, sc); err != nil {
				return err
			}
			if _, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("ans-", i), Scope: sc, Text: fmt.Sprint("answer ", i), Priority: core.PriorityHigh}); err != nil {
				return err
			}
		}
		return nil
	}, func() string { return fmt.Sprintf("%d posted of 5, %d reactions", len(f.Posts()), len(f.Reactions())) })
	if n := len(f.Posts()); n != 5 {
		t.Fatalf("%d answers posted, want 5", n)
	}
	if n, m := len(f.Reactions()), len(f.Typings()); n != decoBurst || m != decoBurst {
		t.Errorf("%d reactions and %d typings sent, want %d of each (their budgets; the rest dropped)", n, m, decoBurst)
	}
	clock.Advance(time.Hour) // the queues run dry and exit
}

// Discord buckets a channel's message creates, edits and reads apart: a
// checklist's edits and a history read take nothing from the answer's
// budget. On a stopped clock at the default pace (1/s, burst 5), after
// the run's other calls in the thread an answer in two parts goes at once.
// The old pacer counted every route in the channel's one bucket: the
// answer's second part waited for a token that, on a stopped clock, never
// came.
func TestDiscordAnswersTakeNoBudgetFromEditsOrReads(t *testing.T) {
	sc := scopeOf(general, oldThread)
	for _, tc := range []struct {
		name   string
		before func(ctx context.Context, a *Adapter) error
	}{
		{"checklist edits", func(ctx context.Context, a *Adapter) error {
			check, err := a.Post(ctx, core.Outbound{Key: "checklist", Scope: sc, Text: "⏳ working"})
			if err != nil {
				return err
			}
			for i := range 3 {
				if err := a.Update(ctx, check, core.Outbound{Text: fmt.Sprint("⏳ step ", i), Priority: core.PriorityEdit}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"history reads", func(ctx context.Context, a *Adapter) error {
			for range 5 {
				if _, err := a.History(ctx, sc, 10); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, discordfake.Config{})
			a, clock := stoppedPace(t, f)
			ctx := t.Context()
			withoutPacingWait(t, func() error {
				if err := tc.before(ctx, a); err != nil {
					return err
				}
				for i := range 2 {
					if _, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("answer-", i), Scope: sc, Text: fmt.Sprint("answer part ", i), Priority: core.PriorityHigh}); err != nil {
						return err
					}
				}
				return nil
			}, func() string { return fmt.Sprintf("%d posts, %d edits", len(f.Posts()), len(f.Edits())) })
			clock.Advance(time.Hour) // the queues run dry and exit
		})
	}
}

// With the fake keeping to Discord's per-route buckets (5 messages per
// 5 s per channel, one reaction per 250 ms), the adapter at its default
// pace never draws a 429: the bucket headers the fake sends on every
// answer are what discordgo waits on once a route's bucket is spent (the
// sixth answer waits for the message bucket's reset), and reactions over
// their budget are dropped rather than sent into a spent bucket.
func TestDiscordKeepsToRouteBuckets(t *testing.T) {
	f := newFake(t, discordfake.Config{RouteBuckets: true})
	a := startAdapter(t, f, newRecorder().deliver, WithChannelPace(time.Second, 5))
	ctx := t.Context()
	for i := range 6 {
		id := f.Say(discordfake.Msg{Channel: oldThread, Author: alice, Content: fmt.Sprint("question ", i)})
		sc := scopeOf(general, oldThread)
		if err := a.React(ctx, core.MessageRef{Scope: sc, ID: id}, "eyes"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("ans-", i), Scope: sc, Text: fmt.Sprint("answer ", i), Priority: core.PriorityHigh}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.Posts()); n != 6 {
		t.Fatalf("%d answers posted, want 6", n)
	}
	for _, c := range f.Calls() {
		if c.Status == 429 {
			t.Errorf("429 on %s %s", c.Method, c.Path)
		}
	}
}

// The pacer lets a reaction through by its own clock, from the instant it
// took the budget; Discord counts the 250 ms window from the instant the
// request arrived. Under load the first reaction arrives late and the next
// one on time, so the pacer's 250 ms can be less at Discord: the stopped
// clock here is advanced the whole window at once, as if the first request
// had taken that long to arrive. The reaction must then keep to the bucket
// headers Discord sent (discordgo's own 200 ms reaction limit, which it
// used in their place, let it through into the spent bucket: a 429): while
// they say the bucket is spent it is dropped, and once it has reset, sent.
func TestDiscordReactionKeepsToItsBucketHeaders(t *testing.T) {
	f := newFake(t, discordfake.Config{RouteBuckets: true})
	a, clock := stoppedPace(t, f)
	ctx := t.Context()
	sc := scopeOf(general, oldThread)
	deadline := time.After(10 * time.Second)
	for i := 0; len(f.Reactions()) < 2; i++ {
		id := f.Say(discordfake.Msg{Channel: oldThread, Author: alice, Content: fmt.Sprint("question ", i)})
		if err := a.React(ctx, core.MessageRef{Scope: sc, ID: id}, "eyes"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(decoInterval)
		select {
		case <-deadline:
			t.Fatalf("%d reactions sent in 10 s, want 2", len(f.Reactions()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, c := range f.Calls() {
		if c.Status == 429 {
			t.Errorf("429 on %s %s", c.Method, c.Path)
		}
	}
}

// A decoration never waits inside discordgo: once a route's bucket says no
// call remains until a reset still ahead (X-RateLimit-Remaining 0,
// -Reset-After 5 s), the next reaction or typing on that route is dropped
// at once. The engine's 👀 is synchronous before the model is called: the
// old adapter left it to discordgo, which slept until the reset (5 s here)
// and then sent it.
func TestDiscordDecorationOnASpentBucketIsDropped(t *testing.T) {
	cases := []struct {
		name, method, prefix string
		do                   func(ctx context.Context, a *Adapter, f *discordfake.Server) error
		sent                 func(f *discordfake.Server) int
	}{
		{
			name: "reaction", method: "PUT", prefix: "channels/" + general + "/messages/",
			do: func(ctx context.Context, a *Adapter, f *discordfake.Server) error {
				id := f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "question"})
				return a.React(ctx, core.MessageRef{Scope: scopeOf(general, ""), ID: id}, "eyes")
			},
			sent: func(f *discordfake.Server) int { return len(f.Reactions()) },
		},
		{
			name: "typing", method: "POST", prefix: "channels/" + general + "/typing",
			do: func(ctx context.Context, a *Adapter, _ *discordfake.Server) error {
				return a.Typing(ctx, scopeOf(general, ""))
			},
			sent: func(f *discordfake.Server) int { return len(f.Typings()) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, discordfake.Config{})
			a := startAdapter(t, f, newRecorder().deliver)
			ctx := t.Context()
			f.SpendBucket(tc.method, tc.prefix, 1, 5*time.Second)
			if err := tc.do(ctx, a, f); err != nil {
				t.Fatal(err)
			}
			if n := tc.sent(f); n != 1 {
				t.Fatalf("%d sent, want the first", n)
			}
			t0 := time.Now()
			if err := tc.do(ctx, a, f); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(t0); took > 2*time.Second {
				t.Fatalf("the %s waited %v for the spent bucket, want dropped at once", tc.name, took)
			}
			if n := tc.sent(f); n != 1 {
				t.Fatalf("%d sent, want the second dropped", n)
			}
			if st := a.OutboundStats(); st.Dropped != 1 {
				t.Fatalf("stats %+v, want the drop counted", st)
			}
		})
	}
}

// stoppedPace starts an adapter whose pacer is at the default pace (1/s,
// burst 5) on a fake clock that moves only when the test moves it.
func stoppedPace(t *testing.T, f *discordfake.Server) (*Adapter, *pacertest.Clock) {
	t.Helper()
	clock := pacertest.New()
	a := startAdapterSetup(t, f, Config{}, newRecorder().deliver, func(a *Adapter) {
		a.pacer = newPacer(clock.Now, clock.After, paceConfig{interval: time.Second, burst: 5}, a.log)
	})
	return a, clock
}

// withoutPacingWait fails t unless calls returns nil within 10 s of wall
// time: on a stopped clock a call that waits for pacing never returns.
// state says what was sent, for the failure.
func withoutPacingWait(t *testing.T, calls func() error, state func() string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- calls() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("waited for pacing: %s", state())
	}
}

// A file is a message: UploadFile goes in the channel's queue of message
// creates, so it waits its turn behind the answers on the channel's budget
// and a 429's retry_after is waited out on the pacer's clock, the file
// posted exactly once. The old upload went past the pacer to discordgo:
// on a stopped clock, after the channel's burst of 5 answers, it was sent
// at once, and a 429 failed it.
func TestDiscordUploadIsPacedAsAMessage(t *testing.T) {
	file := core.File{Name: "report.csv", Title: "the report", Type: "text/csv", Content: []byte("a,b\n1,2\n")}
	sc := scopeOf(general, "")
	// settle moves the stopped clock timer by timer until done reports,
	// checking before each move that nothing more was sent than before.
	settle := func(t *testing.T, clock *pacertest.Clock, done <-chan error, before func()) {
		t.Helper()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
			if at, ok := clock.NextTimer(); ok {
				before()
				clock.AdvanceTo(at)
			}
		}
	}
	t.Run("waits its turn among the answers", func(t *testing.T) {
		f := newFake(t, discordfake.Config{})
		a, clock := stoppedPace(t, f)
		ctx := t.Context()
		start := clock.Now()
		withoutPacingWait(t, func() error {
			for i := range 5 {
				if _, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("ans-", i), Scope: sc, Text: "answer", Priority: core.PriorityHigh}); err != nil {
					return err
				}
			}
			return nil
		}, func() string { return fmt.Sprintf("%d posted of 5", len(f.Posts())) })
		done := make(chan error, 1)
		go func() { done <- a.UploadFile(ctx, sc, file) }()
		for queued := false; !queued; {
			select {
			case err := <-done:
				t.Fatalf("the upload went past the channel's spent budget on a stopped clock (err %v, %d files)", err, len(f.Attachments()))
			case <-time.After(5 * time.Millisecond):
				n, _ := a.pacer.q.Queued(general, core.PriorityHigh)
				queued = n == 1
			}
		}
		// An answer queued after the upload goes after it: one queue, FIFO
		// within a priority.
		answered := make(chan error, 1)
		go func() {
			_, err := a.Post(ctx, core.Outbound{Key: "ans-late", Scope: sc, Text: "late answer", Priority: core.PriorityHigh})
			answered <- err
		}()
		settle(t, clock, done, func() {
			if n := len(f.Attachments()); n != 0 {
				t.Fatalf("%d files sent before the channel's budget had a token", n)
			}
		})
		if d := clock.Now().Sub(start); d < time.Second {
			t.Fatalf("the upload went %v after the burst, before the channel's next token (1 s)", d)
		}
		settle(t, clock, answered, func() {})
		if n := len(f.Attachments()); n != 1 {
			t.Fatalf("%d files posted, want 1", n)
		}
		posts := f.Posts()
		if len(posts) != 7 || posts[5].Content != file.Title || posts[6].Content != "late answer" {
			t.Fatalf("posts %+v, want 5 answers, the file, then the late answer", posts)
		}
		clock.Advance(time.Hour) // the queues run dry and exit
	})
	t.Run("a 429 is waited out", func(t *testing.T) {
		f := newFake(t, discordfake.Config{})
		a, clock := stoppedPace(t, f)
		ctx := t.Context()
		const retry = 2 * time.Second
		f.RateLimit("POST", "channels/"+general+"/messages", 1, retry, false)
		start := clock.Now()
		done := make(chan error, 1)
		go func() { done <- a.UploadFile(ctx, sc, file) }()
		creates := func() string {
			var st []int
			for _, c := range f.Calls() {
				if c.Method == "POST" && c.Path == "channels/"+general+"/messages" {
					st = append(st, c.Status)
				}
			}
			return fmt.Sprint(st)
		}
		settle(t, clock, done, func() {
			if got := creates(); clock.Now().Sub(start) < retry && got != "[429]" {
				t.Fatalf("message creates answered %v before retry_after passed, want the one refused", got)
			}
		})
		if d := clock.Now().Sub(start); d < retry {
			t.Fatalf("sent again %v after the 429, before retry_after (%v)", d, retry)
		}
		if posts := creates(); posts != "[429 200]" {
			t.Fatalf("message creates answered %v, want a 429 then one sent again", posts)
		}
		if n := len(f.Attachments()); n != 1 {
			t.Fatalf("%d files posted, want exactly 1", n)
		}
		if n := a.pacer.rateLimited(); n != 1 {
			t.Fatalf("the pacer waited out %d 429s, want 1", n)
		}
		clock.Advance(time.Hour)
	})
}

// Discord's bot-wide limit (50 REST calls a second) is counted ahead: 60
// answers at once into 60 channels, each well inside its own channel's
// budget, go 50 in the first second and the rest when the next second
// starts, with no 429 needed. The old pacer counted per channel only and
// sent all 60 at once, learning the global limit from a 429.
func TestDiscordCountsTheGlobalLimitAhead(t *testing.T) {
	g := testGuild()
	var chans []string
	for i := range 60 {
		id := fmt.Sprint(310000000000000000 + i)
		g.Channels = append(g.Channels, discordfake.Channel{ID: id, Type: discordfake.TypeText, Name: fmt.Sprint("c", i)})
		chans = append(chans, id)
	}
	f := newFake(t, discordfake.Config{Guilds: []discordfake.Guild{g}})
	a, clock := stoppedPace(t, f)
	ctx := t.Context()
	errs := make(chan error, len(chans))
	for i, ch := range chans {
		go func() {
			_, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("answer-", i), Scope: scopeOf(ch, ""), Text: "answer", Priority: core.PriorityHigh})
			errs <- err
		}()
	}
	state := func() (int, int) { return len(f.Posts()), a.pacer.q.Stats().Queued }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		posts, queued := state()
		if posts == globalPerSecond && queued == len(chans)-globalPerSecond || posts == len(chans) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d posts, %d queued", posts, queued)
		}
	}
	if posts, _ := state(); posts != 50 {
		t.Fatalf("%d posts in the first second on a stopped clock, want Discord's global %d", posts, globalPerSecond)
	}
	clock.Advance(time.Second)
	for range chans {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if posts, _ := state(); posts != len(chans) {
		t.Fatalf("%d posts, want %d", posts, len(chans))
	}
	clock.Advance(time.Hour) // the queues run dry and exit
}
