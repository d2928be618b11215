package journaltest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// fixture is a subtest's journal plus a boundary that drafts for it.
type fixture struct {
	t  *testing.T
	h  Harness
	j  core.Journal
	s  *core.Signer
	v  *core.Verifier
	bd *core.Boundary
}

func newFixture(t *testing.T, h Harness, s *core.Signer) *fixture {
	return &fixture{t: t, h: h, j: h.Journal, s: s, v: s.Verifier(), bd: core.NewBoundary(nil)}
}

// scope names a test channel; every channel of the suite is under platform
// "test", workspace "w".
func scope(ch string) core.Scope {
	return core.Scope{Platform: "test", Workspace: "w", Channel: ch}
}

func key(ch string) core.ChannelKey { return scope(ch).Key() }

// newMsg drafts a message from a person; safe off the test goroutine.
func newMsg(b *core.Boundary, sc core.Scope, text string) (core.Draft, error) {
	ann := core.Person{ID: "U1", Name: "Ann"}
	return b.Human(ann, sc, core.Meta{},
		&core.MessageReceived{MessageID: "m-" + text, Author: ann, Visibility: core.Public, Text: text, Reason: "mention"})
}

func msgDraft(tb testing.TB, b *core.Boundary, sc core.Scope, text string) core.Draft {
	tb.Helper()
	d, err := newMsg(b, sc, text)
	if err != nil {
		tb.Fatalf("draft message: %v", err)
	}
	return d
}

func stepDraft(tb testing.TB, b *core.Boundary, run string, sc core.Scope, i int) core.Draft {
	tb.Helper()
	d, err := b.Agent(run, sc, core.Meta{}, &core.ModelStep{Index: i, Text: fmt.Sprintf("step %d", i), Usage: core.Usage{InputTokens: 10, OutputTokens: i}})
	if err != nil {
		tb.Fatalf("draft step: %v", err)
	}
	return d
}

func (f *fixture) msg(ch, text string) core.Draft { return msgDraft(f.t, f.bd, scope(ch), text) }

func (f *fixture) msgs(ch string, n int) []core.Draft {
	out := make([]core.Draft, n)
	for i := range out {
		out[i] = f.msg(ch, fmt.Sprintf("hello %d", i+1))
	}
	return out
}

// append appends and fails the test on error.
func (f *fixture) append(drafts ...core.Draft) []core.Command {
	f.t.Helper()
	cmds, err := f.j.Append(f.t.Context(), drafts...)
	if err != nil {
		f.t.Fatalf("append: %v", err)
	}
	if len(cmds) != len(drafts) {
		f.t.Fatalf("append %d drafts returned %d commands", len(drafts), len(cmds))
	}
	return cmds
}

// fill appends n messages to ch one by one.
func (f *fixture) fill(ch string, n int) []core.Command {
	f.t.Helper()
	var out []core.Command
	for _, d := range f.msgs(ch, n) {
		out = append(out, f.append(d)...)
	}
	return out
}

func (f *fixture) read(ch core.ChannelKey, from uint64, limit int) []core.Command {
	f.t.Helper()
	cmds, err := f.j.Read(f.t.Context(), ch, from, limit)
	if err != nil {
		f.t.Fatalf("read %s from %d limit %d: %v", ch, from, limit, err)
	}
	return cmds
}

func (f *fixture) head(ch core.ChannelKey) (uint64, core.Hash) {
	f.t.Helper()
	seq, h, err := f.j.Head(f.t.Context(), ch)
	if err != nil {
		f.t.Fatalf("head %s: %v", ch, err)
	}
	return seq, h
}

// verify checks ch verifies and holds n commands.
func (f *fixture) verify(ch core.ChannelKey, n int) {
	f.t.Helper()
	got, err := core.VerifyChannel(f.t.Context(), f.j, f.v, ch)
	if err != nil {
		f.t.Fatalf("verify %s: %v", ch, err)
	}
	if got != n {
		f.t.Fatalf("verify %s: verified %d commands, want %d", ch, got, n)
	}
}

// wantChainError checks err is a *core.ChainError at seq of ch whose reason
// mentions reason.
func wantChainError(tb testing.TB, err error, ch core.ChannelKey, seq uint64, reason string) {
	tb.Helper()
	var ce *core.ChainError
	if !errors.As(err, &ce) {
		tb.Fatalf("got error %v, want a *core.ChainError at seq %d", err, seq)
	}
	if ce.Channel != ch || ce.Seq != seq {
		tb.Fatalf("chain error names %s seq %d (%s), want %s seq %d", ce.Channel, ce.Seq, ce.Reason, ch, seq)
	}
	if reason != "" && !strings.Contains(ce.Reason, reason) {
		tb.Fatalf("chain error reason %q, want it to mention %q", ce.Reason, reason)
	}
}

// sameCommand checks that a read-back command equals the one Append
// returned, field by field, including the exact payload bytes.
func sameCommand(tb testing.TB, got, want core.Command) {
	tb.Helper()
	g, w := got.Record(), want.Record()
	if !g.At.Equal(w.At) || g.At.Location() != time.UTC {
		tb.Fatalf("seq %d: at %v, want %v in UTC", w.Seq, g.At, w.At)
	}
	g.At, w.At = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		tb.Fatalf("seq %d: read back\n  %+v\nwant\n  %+v", w.Seq, g, w)
	}
	if !bytes.Equal(got.RawPayload(), want.RawPayload()) || got.Hash() != want.Hash() {
		tb.Fatalf("seq %d: payload bytes or hash differ after the round trip", w.Seq)
	}
}

func sameCommands(tb testing.TB, got, want []core.Command) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("got %d commands, want %d", len(got), len(want))
	}
	for i := range want {
		sameCommand(tb, got[i], want[i])
	}
}

func seqs(cmds []core.Command) []uint64 {
	out := make([]uint64, len(cmds))
	for i, c := range cmds {
		out[i] = c.Seq()
	}
	return out
}

// contiguous checks cmds are seq 1..n of one chain: consecutive, each prev
// the hash of the one before.
func contiguous(tb testing.TB, cmds []core.Command) {
	tb.Helper()
	var prev core.Hash
	for i, c := range cmds {
		if c.Seq() != uint64(i+1) {
			tb.Fatalf("position %d holds seq %d", i, c.Seq())
		}
		if c.Prev() != prev {
			tb.Fatalf("seq %d: prev does not chain to seq %d", c.Seq(), c.Seq()-1)
		}
		prev = c.Hash()
	}
}
