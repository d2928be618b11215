package journaltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

func testEmpty(t *testing.T, f *fixture) {
	ctx := t.Context()
	if seq, h := f.head(key("none")); seq != 0 || !h.IsZero() {
		t.Fatalf("head of an empty channel: %d %s", seq, h)
	}
	if cmds := f.read(key("none"), 1, 0); len(cmds) != 0 {
		t.Fatalf("read of an empty channel: %d commands", len(cmds))
	}
	chs, err := f.j.Channels(ctx)
	if err != nil || len(chs) != 0 {
		t.Fatalf("channels of an empty journal: %v %v", chs, err)
	}
	if cmds, err := f.j.ReadRun(ctx, "run-none"); err != nil || len(cmds) != 0 {
		t.Fatalf("read run of an empty journal: %d %v", len(cmds), err)
	}
	if n, err := core.VerifyAll(ctx, f.j, f.v); err != nil || n != 0 {
		t.Fatalf("verify an empty journal: %d %v", n, err)
	}
	f.verify(key("none"), 0)
}

func testAppendAndRead(t *testing.T, f *fixture) {
	a, b := key("a"), key("b")
	want := f.fill("a", 10)
	wantB := f.fill("b", 3)
	contiguous(t, want)
	contiguous(t, wantB)

	sameCommands(t, f.read(a, 1, 0), want)
	sameCommands(t, f.read(a, 0, 0), want) // from 0 is from the start
	sameCommands(t, f.read(a, 1, -1), want)
	sameCommands(t, f.read(a, 4, 3), want[3:6])
	sameCommands(t, f.read(a, 10, 5), want[9:])
	sameCommands(t, f.read(a, 1, 100), want)
	if got := f.read(a, 11, 0); len(got) != 0 {
		t.Fatalf("read past the head: seqs %v", seqs(got))
	}
	sameCommands(t, f.read(b, 1, 0), wantB)

	if seq, h := f.head(a); seq != 10 || h != want[9].Hash() {
		t.Fatalf("head of a: %d %s, want 10 %s", seq, h, want[9].Hash())
	}
	if seq, h := f.head(b); seq != 3 || h != wantB[2].Hash() {
		t.Fatalf("head of b: %d %s, want 3 %s", seq, h, wantB[2].Hash())
	}
}

// testRoundTrip stores every envelope field in its awkward forms and reads
// back exactly what was signed.
func testRoundTrip(t *testing.T, f *fixture) {
	// A clock with nanoseconds in a zone that is not UTC: the boundary
	// truncates to microseconds in UTC, and the store must keep that.
	zone := time.FixedZone("X", 5*3600+1800)
	at := time.Date(2024, 2, 29, 23, 59, 59, 123456789, zone)
	bd := core.NewBoundary(func() time.Time { return at })
	sc := core.Scope{Platform: "test", Workspace: "", Channel: "rt", Thread: "1700000000.000100"}
	person := core.Person{ID: "U-ÅÄÖ", Name: "Zoë \"quoted\" <tag> & \u2028"}

	human, err := bd.Human(person, sc, core.Meta{Cause: "01CAUSE"}, &core.MessageReceived{
		MessageID: "m1", Author: person, Visibility: core.Private,
		Text:     "héllo 😀 \x00 \\ \" </script> " + strings.Repeat("long ", 20000),
		Mentions: []core.Mention{{Kind: core.MentionUser, ID: "UBOT"}, {Kind: core.MentionBroadcast, ID: "here"}},
		ReplyTo:  "m0", Reason: "mention",
	})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := bd.Agent("run-1", sc, core.Meta{Cause: human.ID()}, &core.ModelStep{
		Index: 1, Provider: "scripted", Model: "m",
		ToolCalls: []core.ToolCall{{ID: "c1", Name: "fetch", Args: `{"z":1,"a":[true,null]}`}},
		Usage:     core.Usage{InputTokens: 7, OutputTokens: 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	system, err := bd.System("scheduler", sc, core.Meta{}, &core.RoutineFired{RoutineID: "r1", Slot: at})
	if err != nil {
		t.Fatal(err)
	}
	want := f.append(human, agent, system)
	got := f.read(sc.Key(), 1, 0)
	sameCommands(t, got, want)
	wantAt := at.UTC().Truncate(time.Microsecond)
	for _, c := range got {
		if !c.At().Equal(wantAt) || c.At().Location() != time.UTC {
			t.Fatalf("seq %d: at %v, want %v", c.Seq(), c.At(), wantAt)
		}
	}
	if got[0].Actor() != (core.Actor{Type: core.ActorHuman, ID: person.ID, Platform: "test"}) ||
		got[1].Actor() != (core.Actor{Type: core.ActorAgent, ID: "run-1", Platform: "test"}) ||
		got[2].Actor().Type != core.ActorSystem {
		t.Fatalf("actors: %+v %+v %+v", got[0].Actor(), got[1].Actor(), got[2].Actor())
	}
	if got[0].Scope() != sc || got[1].Run() != "run-1" || got[1].Cause() != human.ID() || got[0].Cause() != "01CAUSE" {
		t.Fatalf("scope/run/cause did not round-trip: %+v %q %q", got[0].Scope(), got[1].Run(), got[1].Cause())
	}
	f.verify(sc.Key(), 3)
}

func testBatch(t *testing.T, f *fixture) {
	ch := key("batch")
	first := f.append(f.msgs("batch", 5)...)
	if !slices.Equal(seqs(first), []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("batch seqs %v", seqs(first))
	}
	next := f.append(f.msg("batch", "after"))
	all := append(first, next...)
	contiguous(t, all)
	sameCommands(t, f.read(ch, 1, 0), all)
	if seq, h := f.head(ch); seq != 6 || h != all[5].Hash() {
		t.Fatalf("head %d %s", seq, h)
	}
	f.verify(ch, 6)
}

func testBatchMixedChannels(t *testing.T, f *fixture) {
	before := f.fill("a", 2)
	_, err := f.j.Append(t.Context(), f.msg("a", "x"), f.msg("b", "y"))
	if !errors.Is(err, core.ErrMixedChannels) {
		t.Fatalf("mixed batch: got %v, want core.ErrMixedChannels", err)
	}
	sameCommands(t, f.read(key("a"), 1, 0), before)
	if got := f.read(key("b"), 1, 0); len(got) != 0 {
		t.Fatalf("mixed batch wrote %d commands to b", len(got))
	}
	if seq, _ := f.head(key("b")); seq != 0 {
		t.Fatalf("mixed batch moved b's head to %d", seq)
	}
	chs, err := f.j.Channels(t.Context())
	if err != nil || !slices.Equal(chs, []core.ChannelKey{key("a")}) {
		t.Fatalf("channels after a failed batch: %v %v", chs, err)
	}
	f.verify(key("a"), 2)
}

// testBatchFailsMidway appends a batch whose third draft repeats a journaled
// id: the database rejects it after two rows went in, and none may stay.
func testBatchFailsMidway(t *testing.T, f *fixture) {
	ch := key("mid")
	d := f.msgs("mid", 5)
	first := f.append(d[0])
	if _, err := f.j.Append(t.Context(), d[1], d[2], d[0], d[3]); err == nil {
		t.Fatal("batch repeating a journaled id: no error")
	}
	if _, err := f.j.Append(t.Context(), d[4], d[4]); err == nil {
		t.Fatal("batch repeating an id within itself: no error")
	}
	sameCommands(t, f.read(ch, 1, 0), first)
	if seq, h := f.head(ch); seq != 1 || h != first[0].Hash() {
		t.Fatalf("head moved by a failed batch: %d", seq)
	}
	// The failed drafts' ids were not consumed and seq 2 is free.
	rest := f.append(d[1], d[2], d[3], d[4])
	if !slices.Equal(seqs(rest), []uint64{2, 3, 4, 5}) {
		t.Fatalf("seqs after a failed batch: %v", seqs(rest))
	}
	contiguous(t, append(first, rest...))
	f.verify(ch, 5)
}

func testBadBatches(t *testing.T, f *fixture) {
	if _, err := f.j.Append(t.Context()); err == nil {
		t.Fatal("empty batch: no error")
	}
	if _, err := f.j.Append(t.Context(), core.Draft{}); err == nil {
		t.Fatal("zero draft: no error")
	}
	if _, err := f.j.Append(t.Context(), f.msg("bad", "ok"), core.Draft{}); err == nil {
		t.Fatal("batch with a zero draft: no error")
	}
	if seq, _ := f.head(key("bad")); seq != 0 {
		t.Fatalf("bad batches moved the head to %d", seq)
	}
}

func testCancelledContext(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.j.Append(ctx, f.msg("cx", "never")); err == nil {
		t.Fatal("append with a cancelled context: no error")
	}
	if got := f.read(key("cx"), 1, 0); len(got) != 0 {
		t.Fatalf("append with a cancelled context wrote %d commands", len(got))
	}
	f.fill("cx", 1)
	f.verify(key("cx"), 1)
}

func testVerify(t *testing.T, f *fixture) {
	f.fill("v1", 5)
	f.append(f.msgs("v2", 7)...)
	for i := range 3 {
		f.append(stepDraft(t, f.bd, "run-v", scope("v3"), i))
	}
	n, err := core.VerifyAll(t.Context(), f.j, f.v)
	if err != nil || n != 15 {
		t.Fatalf("verify all: %d %v, want 15 nil", n, err)
	}
	f.verify(key("v1"), 5)
	f.verify(key("v2"), 7)
	f.verify(key("v3"), 3)
}

// testVerifyPages crosses core.VerifyChannel's page size.
func testVerifyPages(t *testing.T, f *fixture) {
	const n, batch = 4500, 250
	for i := 0; i < n; i += batch {
		f.append(f.msgs("pages", batch)...)
	}
	f.verify(key("pages"), n)
	if got := f.read(key("pages"), 4097, 0); len(got) != n-4096 || got[0].Seq() != 4097 {
		t.Fatalf("read the second page: %d commands", len(got))
	}
}

// testForeignSignature appends with another key through a second instance:
// the journal's verifier must reject exactly that command.
func testForeignSignature(t *testing.T, f *fixture) {
	ch := key("foreign")
	f.fill("foreign", 3)
	other := NewSigner(t)
	mallory := f.h.Reopen(t, other)
	forged, err := mallory.Append(t.Context(), f.msg("foreign", "forged"))
	if err != nil {
		t.Fatalf("append through the second instance: %v", err)
	}
	if forged[0].Seq() != 4 {
		t.Fatalf("second instance appended at seq %d, want 4", forged[0].Seq())
	}
	_, err = core.VerifyChannel(t.Context(), f.j, f.v, ch)
	wantChainError(t, err, ch, 4, "signature")
	_, err = core.VerifyChannel(t.Context(), f.j, other.Verifier(), ch)
	wantChainError(t, err, ch, 1, "signature")
	_, err = core.VerifyAll(t.Context(), f.j, f.v)
	wantChainError(t, err, ch, 4, "signature")
}

// hammer runs workers goroutines, each appending rounds times through
// journal(i) to channel(i, r); odd rounds append a batch of three. It
// returns every command appended.
func hammer(t *testing.T, f *fixture, workers, rounds int, journal func(i int) core.Journal, channel func(i, r int) string) []core.Command {
	t.Helper()
	var (
		mu   sync.Mutex
		all  []core.Command
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	for i := range workers {
		wg.Go(func() {
			j := journal(i)
			for r := range rounds {
				ch := channel(i, r)
				texts := []string{fmt.Sprintf("w%d r%d", i, r)}
				if r%2 == 1 {
					texts = append(texts, "b", "c")
				}
				var drafts []core.Draft
				for _, text := range texts {
					d, err := newMsg(f.bd, scope(ch), text)
					if err != nil {
						errs <- err
						return
					}
					drafts = append(drafts, d)
				}
				cmds, err := j.Append(t.Context(), drafts...)
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", i, r, err)
					return
				}
				mu.Lock()
				all = append(all, cmds...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return all
}

// checkConcurrent checks that what the appenders got back is exactly what
// each channel holds: seqs 1..n, no duplicate, one chain, verified.
func checkConcurrent(t *testing.T, f *fixture, appended []core.Command) {
	t.Helper()
	byChannel := map[core.ChannelKey]map[uint64]core.Command{}
	for _, c := range appended {
		m := byChannel[c.Channel()]
		if m == nil {
			m = map[uint64]core.Command{}
			byChannel[c.Channel()] = m
		}
		if prior, dup := m[c.Seq()]; dup {
			t.Fatalf("%s seq %d handed out twice (%s and %s)", c.Channel(), c.Seq(), prior.ID(), c.ID())
		}
		m[c.Seq()] = c
	}
	for ch, m := range byChannel {
		stored := f.read(ch, 1, 0)
		contiguous(t, stored)
		if len(stored) != len(m) {
			t.Fatalf("%s holds %d commands, appenders got %d", ch, len(stored), len(m))
		}
		for _, c := range stored {
			sameCommand(t, c, m[c.Seq()])
		}
		if seq, h := f.head(ch); seq != uint64(len(stored)) || h != stored[len(stored)-1].Hash() {
			t.Fatalf("%s head %d, want %d", ch, seq, len(stored))
		}
		f.verify(ch, len(stored))
	}
	if _, err := core.VerifyAll(t.Context(), f.j, f.v); err != nil {
		t.Fatalf("verify all: %v", err)
	}
}

func testConcurrentOneChannel(t *testing.T, f *fixture) {
	all := hammer(t, f, 16, 12, func(int) core.Journal { return f.j },
		func(int, int) string { return "hot" })
	if want := 16 * (6 + 6*3); len(all) != want {
		t.Fatalf("appended %d, want %d", len(all), want)
	}
	checkConcurrent(t, f, all)
}

func testConcurrentChannels(t *testing.T, f *fixture) {
	all := hammer(t, f, 16, 12, func(int) core.Journal { return f.j },
		func(i, r int) string { return fmt.Sprintf("ch%d", (i+r)%4) })
	checkConcurrent(t, f, all)
	chs, err := f.j.Channels(t.Context())
	if err != nil || len(chs) != 4 {
		t.Fatalf("channels: %v %v", chs, err)
	}
}

// testTwoInstances appends concurrently through two independent instances
// on one database: separate connections, as separate processes have.
func testTwoInstances(t *testing.T, f *fixture) {
	second := f.h.Reopen(t, f.s)
	all := hammer(t, f, 16, 10, func(i int) core.Journal {
		if i%2 == 0 {
			return f.j
		}
		return second
	}, func(i, r int) string { return []string{"shared", "shared", "other"}[(i+r)%3] })
	checkConcurrent(t, f, all)
	if _, err := core.VerifyAll(t.Context(), second, f.v); err != nil {
		t.Fatalf("verify through the second instance: %v", err)
	}
}

func testTamper(t *testing.T, f *fixture) {
	const n = 10
	ctx := t.Context()
	tm := f.h.Tamper
	clean := "clean"
	f.fill(clean, n)
	cases := []struct {
		name   string
		tamper func(ch core.ChannelKey) error
		seq    uint64
		reason string
	}{
		{"PayloadByte", func(ch core.ChannelKey) error { return tm.FlipPayloadByte(ctx, ch, 4, 3) }, 4, "payload hash"},
		{"PayloadLastByte", func(ch core.ChannelKey) error { return tm.FlipPayloadByte(ctx, ch, n, -1) }, n, "payload hash"},
		{"Signature", func(ch core.ChannelKey) error { return tm.FlipSigByte(ctx, ch, 6, 0) }, 6, "signature"},
		{"Actor", func(ch core.ChannelKey) error { return tm.SetActorID(ctx, ch, 3, "U-mallory") }, 3, "signature"},
		{"DeleteFirst", func(ch core.ChannelKey) error { return tm.Delete(ctx, ch, 1) }, 1, "missing"},
		{"DeleteMiddle", func(ch core.ChannelKey) error { return tm.Delete(ctx, ch, 5) }, 5, "missing"},
		{"DeleteLast", func(ch core.ChannelKey) error { return tm.Delete(ctx, ch, n) }, n, "missing"},
		{"DeleteTail", func(ch core.ChannelKey) error {
			return errors.Join(tm.Delete(ctx, ch, n-1), tm.Delete(ctx, ch, n))
		}, n - 1, "missing"},
		{"Swap", func(ch core.ChannelKey) error { return tm.SwapSeq(ctx, ch, 3, 7) }, 3, ""},
		{"SwapAdjacentLast", func(ch core.ChannelKey) error { return tm.SwapSeq(ctx, ch, n-1, n) }, n - 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "t-" + strings.ToLower(tc.name)
			ch := key(name)
			f.fill(name, n)
			f.verify(ch, n)
			if err := tc.tamper(ch); err != nil {
				t.Fatalf("tamper: %v", err)
			}
			_, err := core.VerifyChannel(ctx, f.j, f.v, ch)
			wantChainError(t, err, ch, tc.seq, tc.reason)
			if _, err := core.VerifyAll(ctx, f.j, f.v); err == nil {
				t.Fatal("verify all passed a tampered journal")
			}
		})
	}
	f.verify(key(clean), n)
}

func testRedact(t *testing.T, f *fixture) {
	ctx := t.Context()
	ch := key("priv")
	const secret = "my phone number is 555-0199"
	target := f.append(f.msg("priv", secret))[0]
	f.fill("priv", 2)
	rec, err := f.bd.System("operator", scope("priv"), core.Meta{Cause: target.ID()},
		&core.CommandRedacted{Seq: target.Seq(), ID: target.ID(), Reason: "user asked to delete"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.j.Redact(ctx, target.Seq(), rec)
	if err != nil {
		t.Fatalf("redact: %v", err)
	}
	if got.Seq() != 4 || got.Kind() != core.KindCommandRedacted || got.ID() != rec.ID() {
		t.Fatalf("redaction record: %s id %s", got, got.ID())
	}

	cmds := f.read(ch, 1, 0)
	if len(cmds) != 4 {
		t.Fatalf("channel holds %d commands, want 4", len(cmds))
	}
	c := cmds[0]
	if !c.Redacted() {
		t.Fatal("target not marked redacted")
	}
	if bytes.Contains(c.RawPayload(), []byte("555-0199")) {
		t.Fatalf("redacted payload still holds the text: %s", c.RawPayload())
	}
	if _, err := c.Payload(); !errors.Is(err, core.ErrRedacted) {
		t.Fatalf("payload of a redacted command: %v, want core.ErrRedacted", err)
	}
	if c.PayloadHash() != target.PayloadHash() || c.Hash() != target.Hash() {
		t.Fatal("redaction changed the payload hash or the chain link")
	}
	stored, err := f.h.Tamper.StoredPayload(ctx, ch, target.Seq())
	if err != nil {
		t.Fatalf("stored payload: %v", err)
	}
	if stored != nil {
		t.Fatalf("stored payload after redaction: %q, want NULL", stored)
	}
	sameCommand(t, cmds[3], got)
	p, err := core.Decode[*core.CommandRedacted](cmds[3])
	if err != nil || p.Seq != target.Seq() || p.ID != target.ID() {
		t.Fatalf("redaction record payload: %+v %v", p, err)
	}
	f.verify(ch, 4)
	if seq, h := f.head(ch); seq != 4 || h != got.Hash() {
		t.Fatalf("head after redaction: %d", seq)
	}
	state, err := fold.Fold(ch, cmds)
	if err != nil || !slices.Equal(state.Redacted, []uint64{1}) {
		t.Fatalf("fold after redaction: %+v %v", state, err)
	}
}

func testRedactRejects(t *testing.T, f *fixture) {
	ctx := t.Context()
	ch := key("rr")
	target := f.append(f.msg("rr", "keep me"))[0]
	f.fill("rr", 1)
	redaction := func(ch string, seq uint64, id string) core.Draft {
		d, err := f.bd.System("operator", scope(ch), core.Meta{}, &core.CommandRedacted{Seq: seq, ID: id, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct {
		name   string
		seq    uint64
		record core.Draft
		is     error
	}{
		{"WrongKind", 1, f.msg("rr", "not a redaction"), nil},
		{"WrongSeq", 1, redaction("rr", 2, target.ID()), nil},
		{"WrongID", 1, redaction("rr", 1, "01OTHER"), nil},
		{"Missing", 99, redaction("rr", 99, target.ID()), core.ErrNotFound},
		{"OtherChannel", 1, redaction("elsewhere", 1, target.ID()), nil},
		{"ZeroDraft", 1, core.Draft{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.j.Redact(ctx, tc.seq, tc.record)
			if err == nil {
				t.Fatal("redact: no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("redact: %v, want %v", err, tc.is)
			}
			if seq, _ := f.head(ch); seq != 2 {
				t.Fatalf("rejected redaction moved the head to %d", seq)
			}
			if seq, _ := f.head(key("elsewhere")); seq != 0 {
				t.Fatalf("rejected redaction appended elsewhere (head %d)", seq)
			}
			stored, err := f.h.Tamper.StoredPayload(ctx, ch, 1)
			if err != nil || !bytes.Equal(stored, target.RawPayload()) {
				t.Fatalf("rejected redaction touched the payload: %q %v", stored, err)
			}
		})
	}
	// Redacting twice is refused: the first redaction already holds.
	if _, err := f.j.Redact(ctx, 1, redaction("rr", 1, target.ID())); err != nil {
		t.Fatalf("redact: %v", err)
	}
	if _, err := f.j.Redact(ctx, 1, redaction("rr", 1, target.ID())); err == nil {
		t.Fatal("second redaction of the same command: no error")
	}
	if seq, _ := f.head(ch); seq != 3 {
		t.Fatalf("head after one redaction and one refusal: %d, want 3", seq)
	}
	f.verify(ch, 3)
}

func testReadRun(t *testing.T, f *fixture) {
	ctx := t.Context()
	var want []core.Command
	// Interleave runs and channels; the b channel sorts after a.
	for i := range 3 {
		want = append(want, f.append(stepDraft(t, f.bd, "run-1", scope("rb"), i))...)
		f.append(stepDraft(t, f.bd, "run-2", scope("ra"), i))
		f.append(f.msg("ra", "no run"))
		want = append(want, f.append(stepDraft(t, f.bd, "run-1", scope("ra"), i))...)
	}
	slices.SortStableFunc(want, func(x, y core.Command) int {
		if c := strings.Compare(string(x.Channel()), string(y.Channel())); c != 0 {
			return c
		}
		return int(x.Seq()) - int(y.Seq())
	})
	got, err := f.j.ReadRun(ctx, "run-1")
	if err != nil {
		t.Fatalf("read run: %v", err)
	}
	sameCommands(t, got, want)
	if got, err := f.j.ReadRun(ctx, "run-2"); err != nil || len(got) != 3 {
		t.Fatalf("read run-2: %d %v", len(got), err)
	}
	if got, err := f.j.ReadRun(ctx, "run-none"); err != nil || len(got) != 0 {
		t.Fatalf("read an unknown run: %d %v", len(got), err)
	}
}

func testChannels(t *testing.T, f *fixture) {
	names := []string{"zeta", "Alpha", "alpha", "beta", "ß", "a-b"}
	for _, n := range names {
		f.fill(n, 1)
	}
	other := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}
	f.append(msgDraft(t, f.bd, other, "hi"))
	want := []core.ChannelKey{other.Key()}
	for _, n := range names {
		want = append(want, key(n))
	}
	slices.Sort(want)
	got, err := f.j.Channels(t.Context())
	if err != nil {
		t.Fatalf("channels: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("channels:\n got %v\nwant %v (byte order)", got, want)
	}
}

func testHead(t *testing.T, f *fixture) {
	ch := key("h")
	if seq, h := f.head(ch); seq != 0 || !h.IsZero() {
		t.Fatalf("empty head: %d %s", seq, h)
	}
	one := f.fill("h", 1)
	if seq, h := f.head(ch); seq != 1 || h != one[0].Hash() {
		t.Fatalf("head after one: %d %s", seq, h)
	}
	more := f.append(f.msgs("h", 4)...)
	if seq, h := f.head(ch); seq != 5 || h != more[3].Hash() {
		t.Fatalf("head after a batch: %d %s", seq, h)
	}
	cv := core.NewChainVerifier(f.v, ch)
	for _, c := range f.read(ch, 1, 0) {
		if err := cv.Next(c); err != nil {
			t.Fatal(err)
		}
	}
	if seq, h := cv.Head(); seq != 5 || h != more[3].Hash() {
		t.Fatalf("chain end %d %s does not match the recorded head", seq, h)
	}
}

// testDecode reads typed payloads back through the journal.
func testDecode(t *testing.T, f *fixture) {
	ch := scope("dec")
	expires := time.Date(2030, 1, 2, 3, 4, 5, 600000000, time.UTC)
	payloads := []core.Payload{
		&core.MessageReceived{MessageID: "m1", Author: core.Person{ID: "U1"}, Visibility: core.Public, Text: "hi", Reason: "mention"},
		&core.ApprovalRequested{ApprovalID: "a1", CallID: "c1", Tool: "send", Consequence: "send", Summary: "post", Requester: "U1", ExpiresAt: expires},
		&core.ModelStep{Index: 2, ToolCalls: []core.ToolCall{{ID: "c1", Name: "t", Args: `{"b":1,"a":2}`}}},
		&core.RunCompleted{Summary: "done"},
	}
	var drafts []core.Draft
	for _, p := range payloads {
		d, err := f.bd.System("test", ch, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	want := f.append(drafts...)
	got := f.read(ch.Key(), 1, 0)
	sameCommands(t, got, want) // the exact payload bytes that were hashed
	for i, c := range got {
		p, err := c.Payload()
		if err != nil {
			t.Fatalf("seq %d: decode: %v", c.Seq(), err)
		}
		if !reflect.DeepEqual(p, payloads[i]) {
			t.Fatalf("seq %d: decoded %+v, want %+v", c.Seq(), p, payloads[i])
		}
	}
	if _, err := core.Decode[*core.ApprovalRequested](got[1]); err != nil {
		t.Fatalf("decode approval: %v", err)
	}
}
