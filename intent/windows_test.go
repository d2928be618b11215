package intent

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

const c1 core.ChannelKey = "slack/T1/C1"

func TestObserve(t *testing.T) {
	custom := core.Policy{ThreadWindowS: 60, ToplevelWindowS: 30}
	cases := []struct {
		name string
		p    Post
		pol  core.Policy
		want Updates
	}{
		{
			name: "answer in thread under a top-level message",
			p:    Post{Channel: c1, Thread: "m1", MessageID: "b1", At: t0, Answering: "m1", AnsweringUser: "U1", AnsweringTop: true},
			want: Updates{Channel: c1, Thread: "m1", ThreadUntil: t0.Add(20 * time.Minute),
				SetToplevel: true, Toplevel: Toplevel{Person: "U1", At: t0, Until: t0.Add(6 * time.Minute)}},
		},
		{
			name: "answer at top level opens the thread rooted at the post",
			p:    Post{Channel: c1, MessageID: "b1", At: t0, Answering: "m1", AnsweringUser: "U1", AnsweringTop: true},
			want: Updates{Channel: c1, Thread: "b1", ThreadUntil: t0.Add(20 * time.Minute),
				SetToplevel: true, Toplevel: Toplevel{Person: "U1", At: t0, Until: t0.Add(6 * time.Minute)}},
		},
		{
			name: "answer to a thread message: thread only",
			p:    Post{Channel: c1, Thread: "m1", MessageID: "b2", At: t0, Answering: "m2", AnsweringUser: "U2"},
			want: Updates{Channel: c1, Thread: "m1", ThreadUntil: t0.Add(20 * time.Minute)},
		},
		{
			name: "unprompted digest at top level",
			p:    Post{Channel: c1, MessageID: "d1", At: t0},
			want: Updates{Channel: c1, Thread: "d1", ThreadUntil: t0.Add(20 * time.Minute)},
		},
		{
			name: "answer in a DM: no top-level window",
			p:    Post{Channel: "slack/T1/D1", Thread: "", MessageID: "b3", At: t0, Answering: "m3", AnsweringUser: "U1", AnsweringTop: true, AnsweringDM: true},
			want: Updates{Channel: "slack/T1/D1", Thread: "b3", ThreadUntil: t0.Add(20 * time.Minute)},
		},
		{
			name: "answering without a known author: no top-level window",
			p:    Post{Channel: c1, Thread: "m1", MessageID: "b4", At: t0, Answering: "m1", AnsweringTop: true},
			want: Updates{Channel: c1, Thread: "m1", ThreadUntil: t0.Add(20 * time.Minute)},
		},
		{
			name: "top-level post without an id opens no thread",
			p:    Post{Channel: c1, At: t0, Answering: "m1", AnsweringUser: "U1", AnsweringTop: true},
			want: Updates{Channel: c1, SetToplevel: true, Toplevel: Toplevel{Person: "U1", At: t0, Until: t0.Add(6 * time.Minute)}},
		},
		{
			name: "per-channel policy lengths",
			p:    Post{Channel: c1, Thread: "m1", MessageID: "b1", At: t0, Answering: "m1", AnsweringUser: "U1", AnsweringTop: true},
			pol:  custom,
			want: Updates{Channel: c1, Thread: "m1", ThreadUntil: t0.Add(time.Minute),
				SetToplevel: true, Toplevel: Toplevel{Person: "U1", At: t0, Until: t0.Add(30 * time.Second)}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(tc.p, tc.pol)
			if got != tc.want {
				t.Fatalf("Observe =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

// TestPolicyWindowLengths drives Decide through Observe and a store with a
// channel whose admin shortened both windows, next to a default channel.
func TestPolicyWindowLengths(t *testing.T) {
	ctx := context.Background()
	now := t0
	clock := func() time.Time { return now }
	s := NewMemoryStore(clock)
	short := core.Policy{ThreadWindowS: 90, ToplevelWindowS: 45}
	long := core.Policy{ThreadWindowS: 3600, ToplevelWindowS: 900}
	chans := map[core.ChannelKey]core.Policy{"slack/T1/SHORT": short, "slack/T1/DEFAULT": {}, "slack/T1/LONG": long}
	for ch, pol := range chans {
		p := Post{Channel: ch, Thread: "m1", MessageID: "b1", At: t0, Answering: "m1", AnsweringUser: "U1", AnsweringTop: true}
		if err := Observe(p, pol).Apply(ctx, s, now); err != nil {
			t.Fatal(err)
		}
	}
	for ch, pol := range chans {
		sc, err := core.ParseChannelKey(string(ch))
		if err != nil {
			t.Fatal(err)
		}
		thread := ev(func(e *core.Event) { e.Scope = sc; e.Scope.Thread = "m1"; e.Author.ID = "U2" })
		top := ev(func(e *core.Event) { e.Scope = sc })
		for _, c := range []struct {
			e      core.Event
			length time.Duration
			route  Reason
		}{
			{thread, pol.ThreadWindow(), ReasonThreadWindow},
			{top, pol.ToplevelWindow(), ReasonToplevelWindow},
		} {
			for _, at := range []struct {
				off  time.Duration
				want Reason
			}{{c.length - time.Second, c.route}, {c.length, ReasonNoWindow}} {
				now = t0.Add(at.off)
				w, err := s.Windows(ctx, ch, c.e.Scope.Thread)
				if err != nil {
					t.Fatal(err)
				}
				if got := Decide(c.e, w, now); got.Reason != at.want {
					t.Errorf("%s thread=%q at +%v: %v, want %v", ch, c.e.Scope.Thread, at.off, got, at.want)
				}
			}
		}
		now = t0
	}
}

// journal builds signed commands the way the ingress and run loop do.
type journal struct {
	t      *testing.T
	now    time.Time
	b      *core.Boundary
	signer *core.Signer
	seq    map[core.ChannelKey]uint64
	prev   map[core.ChannelKey]core.Hash
	cmds   []core.Command
}

func newJournal(t *testing.T) *journal {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := core.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{t: t, signer: signer, seq: map[core.ChannelKey]uint64{}, prev: map[core.ChannelKey]core.Hash{}}
	j.b = core.NewBoundary(func() time.Time { return j.now })
	return j
}

func (j *journal) add(d core.Draft, err error) core.Command {
	j.t.Helper()
	if err != nil {
		j.t.Fatal(err)
	}
	ch := d.Channel()
	j.seq[ch]++
	c, err := j.signer.Seal(d, j.seq[ch], j.prev[ch])
	if err != nil {
		j.t.Fatal(err)
	}
	j.prev[ch] = c.Hash()
	j.cmds = append(j.cmds, c)
	return c
}

func (j *journal) posted(at time.Time, scope core.Scope, p core.MessagePosted) core.Command {
	j.now = at
	d, err := j.b.Agent("run1", scope, core.Meta{}, &p)
	return j.add(d, err)
}

func (j *journal) received(at time.Time, scope core.Scope, p core.MessageReceived) core.Command {
	j.now = at
	d, err := j.b.Human(p.Author, scope, core.Meta{}, &p)
	return j.add(d, err)
}

func (j *journal) policy(at time.Time, scope core.Scope, pol core.Policy) core.Command {
	j.now = at
	d, err := j.b.System("admin", scope, core.Meta{}, &core.PolicyChanged{Policy: pol})
	return j.add(d, err)
}

func TestRebuild(t *testing.T) {
	ctx := context.Background()
	j := newJournal(t)
	sc := func(ch, thread string) core.Scope {
		return core.Scope{Platform: "slack", Workspace: "T1", Channel: ch, Thread: thread}
	}
	// C1: an old thread (expired at rebuild), then U1 then U2 answered.
	j.posted(t0.Add(-time.Hour), sc("C1", "old"), core.MessagePosted{MessageID: "b0", Answering: "m0", AnsweringUser: "U9", AnsweringTop: true})
	j.received(t0, sc("C1", ""), core.MessageReceived{MessageID: "m1", Author: core.Person{ID: "U1"}, Visibility: core.Public, Reason: "mention"})
	j.posted(t0.Add(time.Second), sc("C1", "m1"), core.MessagePosted{MessageID: "b1", Answering: "m1", AnsweringUser: "U1", AnsweringTop: true})
	j.posted(t0.Add(2*time.Second), sc("C1", ""), core.MessagePosted{MessageID: "b2", Answering: "m2", AnsweringUser: "U2", AnsweringTop: true})
	// A thread answer extends m1 without moving the top-level window.
	j.posted(t0.Add(3*time.Second), sc("C1", "m1"), core.MessagePosted{MessageID: "b3", Answering: "m5", AnsweringUser: "U5"})
	// C2: the admin shortened the windows before the post.
	j.policy(t0, sc("C2", ""), core.Policy{ThreadWindowS: 120, ToplevelWindowS: 90})
	j.posted(t0.Add(time.Second), sc("C2", "m7"), core.MessagePosted{MessageID: "b7", Answering: "m7", AnsweringUser: "U7", AnsweringTop: true})
	// D1: a DM answer gives no top-level window.
	j.received(t0, sc("D1", ""), core.MessageReceived{MessageID: "m8", Author: core.Person{ID: "U8"}, Visibility: core.DM, Reason: "dm"})
	j.posted(t0.Add(time.Second), sc("D1", ""), core.MessagePosted{MessageID: "b8", Answering: "m8", AnsweringUser: "U8", AnsweringTop: true})
	// A redacted post is skipped.
	red := j.posted(t0.Add(time.Second), sc("C3", "m9"), core.MessagePosted{MessageID: "b9", Answering: "m9", AnsweringUser: "U9", AnsweringTop: true})
	rec := red.Record()
	rec.Redacted, rec.Payload = true, nil
	redacted, err := core.FromRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	j.cmds[len(j.cmds)-1] = redacted

	now := t0.Add(10 * time.Second)
	s := NewMemoryStore(func() time.Time { return now })
	// C4's policy comes from the caller (no policy.changed in the tail).
	j.posted(t0.Add(time.Second), sc("C4", "m10"), core.MessagePosted{MessageID: "b10", Answering: "m10", AnsweringUser: "U10", AnsweringTop: true})
	policy := func(ch core.ChannelKey) core.Policy {
		if ch == "slack/T1/C4" {
			return core.Policy{ThreadWindowS: 600, ToplevelWindowS: 60}
		}
		return core.Policy{}
	}
	n, err := Rebuild(ctx, s, j.cmds, policy, now)
	if err != nil {
		t.Fatal(err)
	}
	// Threads m1, b2, C2/m7, D1/b8, C4/m10; tops C1, C2, C4.
	if n != 8 || s.Len() != 8 {
		t.Fatalf("Rebuild wrote %d windows, store holds %d; want 8", n, s.Len())
	}
	check := func(ch core.ChannelKey, thread string, wantThread time.Time, wantTop Toplevel) {
		t.Helper()
		w, err := s.Windows(ctx, ch, thread)
		if err != nil {
			t.Fatal(err)
		}
		if !w.ThreadUntil.Equal(wantThread) || w.Toplevel != wantTop {
			t.Errorf("%s/%s: got %+v, want thread %v top %+v", ch, thread, w, wantThread, wantTop)
		}
	}
	top1 := Toplevel{Person: "U2", At: t0.Add(2 * time.Second), Until: t0.Add(2*time.Second + 6*time.Minute)}
	check("slack/T1/C1", "old", time.Time{}, top1)
	check("slack/T1/C1", "m1", t0.Add(3*time.Second+20*time.Minute), top1)
	check("slack/T1/C1", "b2", t0.Add(2*time.Second+20*time.Minute), top1)
	check("slack/T1/C2", "m7", t0.Add(time.Second+2*time.Minute), Toplevel{Person: "U7", At: t0.Add(time.Second), Until: t0.Add(time.Second + 90*time.Second)})
	check("slack/T1/D1", "b8", t0.Add(time.Second+20*time.Minute), Toplevel{})
	check("slack/T1/C3", "m9", time.Time{}, Toplevel{})
	check("slack/T1/C4", "m10", t0.Add(time.Second+10*time.Minute), Toplevel{Person: "U10", At: t0.Add(time.Second), Until: t0.Add(time.Second + time.Minute)})

	// Rebuild is idempotent.
	if _, err := Rebuild(ctx, s, j.cmds, policy, now); err != nil || s.Len() != 8 {
		t.Fatalf("second Rebuild: %v, %d windows", err, s.Len())
	}
	// Everything expired: nothing written.
	empty := NewMemoryStore(func() time.Time { return t0.Add(24 * time.Hour) })
	if n, err := Rebuild(ctx, empty, j.cmds, nil, t0.Add(24*time.Hour)); err != nil || n != 0 || empty.Len() != 0 {
		t.Fatalf("Rebuild of expired windows: n=%d err=%v len=%d", n, err, empty.Len())
	}
}

func TestPostFromCommand(t *testing.T) {
	j := newJournal(t)
	scope := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "m1"}
	c := j.posted(t0, scope, core.MessagePosted{EffectID: "e1", MessageID: "b1", Answering: "m1", AnsweringUser: "U1", AnsweringTop: true, Text: "hi"})
	p, ok, err := PostFromCommand(c)
	if err != nil || !ok {
		t.Fatalf("PostFromCommand: %v %v", ok, err)
	}
	want := Post{Channel: c1, Thread: "m1", MessageID: "b1", At: t0, Answering: "m1", AnsweringUser: "U1", AnsweringTop: true}
	if p != want {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	other := j.received(t0, scope, core.MessageReceived{MessageID: "m2", Author: core.Person{ID: "U1"}, Visibility: core.Public})
	if _, ok, err := PostFromCommand(other); ok || err != nil {
		t.Fatalf("message.received read as a post: %v %v", ok, err)
	}
}

func TestMemoryStorePrunes(t *testing.T) {
	ctx := context.Background()
	now := t0
	s := NewMemoryStore(func() time.Time { return now })
	for i := range 1000 {
		ch := core.ChannelKey("slack/T1/C" + string(rune('a'+i%26)))
		if err := s.ExtendThread(ctx, ch, "th"+string(rune(i)), now.Add(20*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.SetToplevel(ctx, ch, Toplevel{Person: "U1", At: now, Until: now.Add(6 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 1000+26 {
		t.Fatalf("Len = %d, want %d", s.Len(), 1026)
	}
	// Expired entries read as absent at once...
	now = t0.Add(20 * time.Minute)
	if w, _ := s.Windows(ctx, "slack/T1/Ca", "th\x00"); w != (Windows{}) {
		t.Fatalf("expired window read back: %+v", w)
	}
	// ...and the next write after a sweep interval drops them all.
	if err := s.ExtendThread(ctx, c1, "fresh", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 1 {
		t.Fatalf("after sweep Len = %d, want 1", s.Len())
	}
	now = now.Add(2 * time.Minute)
	s.Prune()
	if s.Len() != 0 {
		t.Fatalf("after Prune Len = %d, want 0", s.Len())
	}
}

// TestMemoryStoreBoundedUnderChurn opens windows continuously for hours of
// simulated time: the store never holds more than the windows opened in one
// window length plus one sweep interval.
func TestMemoryStoreBoundedUnderChurn(t *testing.T) {
	ctx := context.Background()
	now := t0
	s := NewMemoryStore(func() time.Time { return now })
	maxLen := 0
	for i := range 6 * 3600 { // one post a second for 6 h
		now = t0.Add(time.Duration(i) * time.Second)
		if err := s.ExtendThread(ctx, c1, "th"+time.Duration(i).String(), now.Add(20*time.Minute)); err != nil {
			t.Fatal(err)
		}
		maxLen = max(maxLen, s.Len())
	}
	if limit := int((20*time.Minute + sweepEvery) / time.Second); maxLen > limit+1 {
		t.Fatalf("store grew to %d windows; bound %d", maxLen, limit)
	}
}
