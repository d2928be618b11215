package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
)

// heldReidentify makes the pause before a re-IDENTIFY wait until the test
// releases it, so messages can be posted while no session exists.
func heldReidentify(a *Adapter) (release func()) {
	gate := make(chan struct{})
	a.reidentify = func() time.Duration { <-gate; return 0 }
	return func() { close(gate) }
}

// A non-resumable op 9 starts a session that replays nothing. The messages
// posted while no session existed, in a channel the bot was talking in, are
// read back (GET messages?after=) and delivered once each, in order, before
// and alongside what arrives live; a channel the bot was not active in is
// not read.
func TestNonResumableInvalidSessionFillsTheGap(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	var release func()
	startAdapterSetup(t, f, Config{}, rec.deliver, func(a *Adapter) { release = heldReidentify(a) })
	bot := f.Bot().ID
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot + "> hello"})
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "chatter in ops"})
	rec.waitFor(t, "hello and chatter", func() bool { return len(rec.events()) == 2 })

	f.InvalidSession(false) // the session is gone: Say below dispatches to nobody
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "gap 1"})
	f.Say(discordfake.Msg{Channel: general, Author: bob, Content: "gap 2"})
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "gap in ops"})
	release()
	if !f.Wait(10*time.Second, func() bool { return len(f.IdentifiesLocked()) == 2 && f.ConnectedLocked() }) {
		t.Fatalf("no second IDENTIFY: %+v", f.Identifies())
	}
	rec.waitFor(t, "the messages posted during the gap", func() bool {
		_, ok := rec.eventByText("gap 2")
		return ok
	})
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "live again"})
	rec.waitFor(t, "live again", func() bool { _, ok := rec.eventByText("live again"); return ok })

	var got []string
	for _, e := range rec.events() {
		if e.Scope.Channel == general {
			got = append(got, e.Text)
		}
		if e.Text == "gap in ops" {
			t.Errorf("ops (the bot not active there) was gap-filled")
		}
	}
	want := []string{"hello", "gap 1", "gap 2", "live again"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("general delivered %q, want %q exactly once each", got, want)
	}
	for _, c := range f.Calls() {
		if c.Method == "GET" && strings.HasPrefix(c.Path, "channels/"+ops+"/messages") {
			t.Errorf("read %s: ops was not a conversation of the bot's", c.Path)
		}
	}
}

// A gap-filled message older than GapMaxAge is not delivered: answering it
// now would be too late. A close code forbidding resume (4009) re-IDENTIFYs
// and fills the same way.
func TestGapFillSkipsMessagesOlderThanTheWindow(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapterConfig(t, f, Config{GapMaxAge: time.Nanosecond}, rec.deliver)
	bot := f.Bot().ID
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot + "> hello"})
	rec.waitFor(t, "hello", func() bool { return len(rec.events()) == 1 })

	f.CloseWith(4009, "session timed out")
	// Missed, not Say: the reconnect may already have a new session, and a
	// dispatched message would arrive live rather than by gap fill.
	f.Missed(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot + "> too late"})
	if !f.Wait(10*time.Second, func() bool { return len(f.IdentifiesLocked()) == 2 && f.ConnectedLocked() }) {
		t.Fatalf("no second IDENTIFY: %+v", f.Identifies())
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.gapFills.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no gap fill after the re-IDENTIFY")
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "live"})
	rec.waitFor(t, "live", func() bool { _, ok := rec.eventByText("live"); return ok })
	if _, ok := rec.eventByText("too late"); ok {
		t.Fatal("a message older than the window was delivered by gap fill")
	}
	var read bool
	for _, c := range f.Calls() {
		read = read || (c.Method == "GET" && strings.HasPrefix(c.Path, "channels/"+general+"/messages"))
	}
	if !read {
		t.Fatal("general was not read after the re-IDENTIFY")
	}
}

// staticGaps is a GapSource with fixed answers, standing in for the
// journal.
type staticGaps []GapChannel

func (s staticGaps) GapChannels(context.Context) ([]GapChannel, error) { return s, nil }

// A restarted process saw nothing, so only its GapSource (the journal) can
// say where the bot was talking. Its first IDENTIFY reads those channels
// after the journaled id and delivers what was posted meanwhile, once, in
// order; a message at or before that id is not delivered again; a channel
// the source does not name, or names with an id that is no Discord id (a
// routine's trigger), is not read. (Before GapSource the first IDENTIFY
// read nothing.)
func TestFirstIdentifyFillsTheJournaledChannels(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	bot := f.Bot().ID
	// Posted before this process existed: no session receives them.
	seen := f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot + "> before the crash"})
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "down 1"})
	f.Say(discordfake.Msg{Channel: general, Author: bob, Content: "down 2"})
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "down in ops"})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver, WithGapSource(staticGaps{
		{Channel: general, After: "1"}, {Channel: general, After: seen}, // the newest id counts
		{Channel: ops, After: "01JROUTINE0000000000000000"},
	}))
	rec.waitFor(t, "the messages posted while the bot was down", func() bool {
		_, ok := rec.eventByText("down 2")
		return ok
	})
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "live"})
	rec.waitFor(t, "live", func() bool { _, ok := rec.eventByText("live"); return ok })
	var got []string
	for _, e := range rec.events() {
		got = append(got, e.Text)
	}
	if want := []string{"down 1", "down 2", "live"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %q, want %q exactly once each", got, want)
	}
	for _, c := range f.Calls() {
		if c.Method == "GET" && strings.HasPrefix(c.Path, "channels/"+ops+"/messages") {
			t.Errorf("read %s: the source named ops with no message id", c.Path)
		}
	}
	if a.gapFills.Load() != 1 {
		t.Errorf("%d gap fills, want 1 (after the first IDENTIFY)", a.gapFills.Load())
	}
}

// blockingGaps is a gap source whose next GapChannels waits until the
// test releases it (armed), so a live message arrives while the gap fill
// has not read the gap yet.
type blockingGaps struct {
	armed   chan struct{} // closed: the next call blocks
	entered chan struct{}
	release chan struct{}
}

func (g *blockingGaps) GapChannels(ctx context.Context) ([]GapChannel, error) {
	select {
	case <-g.armed:
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	default:
	}
	return nil, nil
}

// Gap fill keeps order with live messages: a message posted live while the
// new session's gap fill is still reading is delivered after the messages
// the gap fill finds, not before them (it used to queue first, ahead of
// older messages of the same channel).
func TestGapFillKeepsOrderWithLiveMessages(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	src := &blockingGaps{armed: make(chan struct{}), entered: make(chan struct{}), release: make(chan struct{})}
	var release func()
	var a *Adapter
	a = startAdapterSetup(t, f, Config{}, rec.deliver, func(ad *Adapter) { release = heldReidentify(ad) }, WithGapSource(src))
	bot := f.Bot().ID
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot + "> hello"})
	rec.waitFor(t, "hello", func() bool { return len(rec.events()) == 1 })

	f.InvalidSession(false)
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "gap 1"})
	close(src.armed)
	release()
	<-src.entered // the new session's gap fill has begun, and waits
	f.Say(discordfake.Msg{Channel: general, Author: bob, Content: "live after"})
	awaitHold(t, a, rec, 1, 0, 1)
	close(src.release)
	rec.waitFor(t, "everything", func() bool { return len(rec.events()) == 3 })
	var got []string
	for _, e := range rec.events() {
		got = append(got, e.Text)
	}
	if want := []string{"gap 1", "live after"}; fmt.Sprint(got[1:]) != fmt.Sprint(want) {
		t.Fatalf("delivered %q, want the gap's message before the live one", got)
	}
}

// awaitHold waits until held live messages are held and waiting wait for
// room in the hold; it fails as soon as more than delivered events reached
// the engine (a live message passed the hold).
func awaitHold(t *testing.T, a *Adapter, rec *recorder, held, waiting, delivered int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		h, w := a.heldLive()
		if h == held && w == waiting {
			return
		}
		if n := len(rec.events()); time.Now().After(deadline) || n > delivered {
			t.Fatalf("held %d and waiting %d, want %d and %d; delivered %d, want %d", h, w, held, waiting, n, delivered)
		}
	}
}

// The hold is bounded. Past the bound the gateway is not read until the
// gap fill releases it: a live message never passes an older one the gap
// fill has yet to queue (it used to be queued at once, ahead of them).
func TestGapFillHoldFullKeepsOrder(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	src := &blockingGaps{armed: make(chan struct{}), entered: make(chan struct{}), release: make(chan struct{})}
	var release func()
	a := startAdapterSetup(t, f, Config{}, rec.deliver, func(ad *Adapter) {
		release = heldReidentify(ad)
		ad.hold.max = 1
	}, WithGapSource(src))
	bot := f.Bot().ID
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot + "> hello"})
	rec.waitFor(t, "hello", func() bool { return len(rec.events()) == 1 })

	f.InvalidSession(false)
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "gap 1"})
	close(src.armed)
	release()
	<-src.entered
	for _, text := range []string{"live 1", "live 2", "live 3"} {
		f.Say(discordfake.Msg{Channel: general, Author: bob, Content: text})
	}
	awaitHold(t, a, rec, 1, 1, 1) // live 1 held, live 2 waits for room
	close(src.release)
	rec.waitFor(t, "everything", func() bool { return len(rec.events()) == 5 })
	var got []string
	for _, e := range rec.events() {
		got = append(got, e.Text)
	}
	if want := []string{"hello", "gap 1", "live 1", "live 2", "live 3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}

// Once a gap fill knows its channels, only their live messages wait, each
// until its own channel's gap is queued: a channel it does not read, or
// has read, is not held up behind one it is still reading.
func TestGapFillHoldsOnlyChannelsStillToRead(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	a.holdLive() // a new session's READY
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "ops 1"})
	awaitHold(t, a, rec, 1, 0, 0) // every channel waits while the fill lists
	left := a.gapListed([]GapChannel{{Channel: general, After: "1"}})
	rec.waitFor(t, "ops 1, released once general alone is to be read", func() bool { return len(rec.events()) == 1 })
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "general 1"})
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "ops 2"})
	rec.waitFor(t, "ops 2", func() bool { _, ok := rec.eventByText("ops 2"); return ok })
	awaitHold(t, a, rec, 1, 0, 2)
	left.done(general)
	a.gapQueued(general)
	a.gapAbandoned(left) // nothing left: releases nothing twice
	rec.waitFor(t, "general 1", func() bool { _, ok := rec.eventByText("general 1"); return ok })
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "general 2"})
	rec.waitFor(t, "general 2", func() bool { return len(rec.events()) == 4 })
	var got []string
	for _, e := range rec.events() {
		got = append(got, e.Text)
	}
	if want := []string{"ops 1", "ops 2", "general 1", "general 2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}
