package journaltest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The expected-head and fencing part of the suite, and the lease table
// (core.Leases) every journal implementation also is.

func leasesOf(t *testing.T, j core.Journal) core.Leases {
	t.Helper()
	l, ok := j.(core.Leases)
	if !ok {
		t.Fatalf("%T does not implement core.Leases: every journal is also the lease table its fences are checked against", j)
	}
	return l
}

// An append at a stale head writes nothing; at the current head it goes on.
func testAppendAtHead(t *testing.T, f *fixture) {
	ctx := t.Context()
	ch := key("c")
	if _, err := f.j.AppendAt(ctx, core.Expect{Head: 0}, f.msg("c", "first")); err != nil {
		t.Fatalf("append at head 0 of an empty channel: %v", err)
	}
	f.fill("c", 2)
	for _, stale := range []uint64{0, 1, 2, 4} {
		_, err := f.j.AppendAt(ctx, core.Expect{Head: stale}, f.msg("c", "stale"))
		if !errors.Is(err, core.ErrHeadMoved) {
			t.Fatalf("append expecting head %d when it is 3: err = %v, want ErrHeadMoved", stale, err)
		}
	}
	if seq, _ := f.head(ch); seq != 3 {
		t.Fatalf("head after refused appends = %d, want 3", seq)
	}
	cmds, err := f.j.AppendAt(ctx, core.Expect{Head: 3}, f.msgs("c", 2)...)
	if err != nil || len(cmds) != 2 || cmds[0].Seq() != 4 {
		t.Fatalf("append at the current head: %v %v", seqs(cmds), err)
	}
	f.verify(ch, 5)
}

// Writers from two instances that all expect the same head: exactly one
// wins each round, the rest learn the head moved.
func testAppendAtRace(t *testing.T, f *fixture) {
	second := f.h.Reopen(t, f.s)
	ch := key("race")
	const writers, rounds = 6, 5
	for r := range rounds {
		head, _ := f.head(ch)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, moved := 0, 0
		for i := range writers {
			j := f.j
			if i%2 == 1 {
				j = second
			}
			d := f.msg("race", "w")
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := j.AppendAt(t.Context(), core.Expect{Head: head}, d)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, core.ErrHeadMoved):
					moved++
				default:
					t.Errorf("round %d: %v", r, err)
				}
			}()
		}
		wg.Wait()
		if won != 1 || moved != writers-1 {
			t.Fatalf("round %d: %d won, %d refused; want 1 and %d", r, won, moved, writers-1)
		}
	}
	f.verify(ch, rounds)
}

// A writer whose lease passed to another holder cannot append, even at the
// right head; the new holder can.
func testAppendAtFence(t *testing.T, f *fixture) {
	ctx := t.Context()
	ls := leasesOf(t, f.j)
	ch := key("fenced")
	name := core.ChannelLease(ch)
	const ttl = 300 * time.Millisecond
	a, ok, err := ls.Acquire(ctx, name, "replica-a", ttl)
	if err != nil || !ok {
		t.Fatalf("acquire a free lease: %v %v", ok, err)
	}
	if _, err := f.j.AppendAt(ctx, core.Expect{Head: 0, Fence: &a}, f.msg("fenced", "by a")); err != nil {
		t.Fatalf("append under a held lease: %v", err)
	}
	waitLapsed(t, ls, name)
	b, ok, err := ls.Acquire(ctx, name, "replica-b", time.Minute)
	if err != nil || !ok || b.Token <= a.Token {
		t.Fatalf("take over a lapsed lease: %+v %v %v (a had %d)", b, ok, err, a.Token)
	}
	_, err = f.j.AppendAt(ctx, core.Expect{Head: 1, Fence: &a}, f.msg("fenced", "late write by a"))
	if !errors.Is(err, core.ErrFenced) {
		t.Fatalf("append by the deposed holder: err = %v, want ErrFenced", err)
	}
	if seq, _ := f.head(ch); seq != 1 {
		t.Fatalf("head after the fenced append = %d, want 1", seq)
	}
	if _, err := f.j.AppendAt(ctx, core.Expect{Head: 1, Fence: &b}, f.msg("fenced", "by b")); err != nil {
		t.Fatalf("append by the new holder: %v", err)
	}
	if held, err := ls.Renew(ctx, "replica-a", ttl, name); err != nil || len(held) != 0 {
		t.Fatalf("the deposed holder renewed %v (%v)", held, err)
	}
	f.verify(ch, 2)
}

func waitLapsed(t *testing.T, ls core.Leases, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		names, err := ls.Lapsed(t.Context(), core.ChannelLeasePrefix)
		if err != nil {
			t.Fatalf("lapsed: %v", err)
		}
		for _, n := range names {
			if n == name {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s never lapsed (lapsed: %v)", name, names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The lease table itself.
func testLeases(t *testing.T, f *fixture) {
	ctx := t.Context()
	ls := leasesOf(t, f.j)
	other := leasesOf(t, f.h.Reopen(t, f.s))
	const n1, n2 = "channel:one", "channel:two"
	a, ok, err := ls.Acquire(ctx, n1, "a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, ok, _ := other.Acquire(ctx, n1, "b", time.Minute); ok {
		t.Fatal("a second holder acquired a held lease (through another instance)")
	}
	again, ok, err := ls.Acquire(ctx, n1, "a", time.Minute)
	if err != nil || !ok || again.Token != a.Token {
		t.Fatalf("the holder re-acquiring changed the fence: %+v -> %+v (%v %v)", a, again, ok, err)
	}
	if _, ok, _ := ls.Acquire(ctx, n2, "a", time.Minute); !ok {
		t.Fatal("acquire a second name")
	}
	held, err := ls.Renew(ctx, "a", time.Minute, n1, n2, "channel:never")
	if err != nil || len(held) != 2 {
		t.Fatalf("renew: %v %v", held, err)
	}
	if err := ls.Release(ctx, "b", n1); err != nil {
		t.Fatalf("release by a non-holder: %v", err)
	}
	if _, ok, _ := other.Acquire(ctx, n1, "b", time.Minute); ok {
		t.Fatal("a release by a non-holder freed the lease")
	}
	if err := ls.Release(ctx, "a", n1); err != nil {
		t.Fatalf("release: %v", err)
	}
	b, ok, err := other.Acquire(ctx, n1, "b", time.Minute)
	if err != nil || !ok || b.Token <= a.Token {
		t.Fatalf("acquire a released lease: %+v %v %v", b, ok, err)
	}
	if lapsed, err := ls.Lapsed(ctx, "channel:"); err != nil || len(lapsed) != 0 {
		t.Fatalf("lapsed with every lease live: %v %v", lapsed, err)
	}
	if live, err := other.Live(ctx, "channel:"); err != nil || !slices.Equal(live, []string{n1, n2}) {
		t.Fatalf("live = %v (%v), want [%s %s]", live, err, n1, n2)
	}
	// A short lease left to lapse shows up; a released one never does.
	if _, ok, _ := ls.Acquire(ctx, "channel:short", "a", 100*time.Millisecond); !ok {
		t.Fatal("acquire short")
	}
	if _, ok, _ := ls.Acquire(ctx, "poller:x", "a", 100*time.Millisecond); !ok {
		t.Fatal("acquire poller")
	}
	if _, ok, _ := ls.Acquire(ctx, "channel:gone", "a", 100*time.Millisecond); !ok {
		t.Fatal("acquire gone")
	}
	if err := ls.Release(ctx, "a", "channel:gone"); err != nil {
		t.Fatal(err)
	}
	waitLapsed(t, ls, "channel:short")
	lapsed, err := ls.Lapsed(ctx, "channel:")
	if err != nil || len(lapsed) != 1 || lapsed[0] != "channel:short" {
		t.Fatalf("lapsed = %v (%v), want [channel:short]", lapsed, err)
	}
	// Neither a lapsed nor a released lease is live; another prefix is not listed.
	if live, err := ls.Live(ctx, "channel:"); err != nil || !slices.Equal(live, []string{n1, n2}) {
		t.Fatalf("live = %v (%v), want [%s %s]", live, err, n1, n2)
	}
	// Renewing a lapsed lease nobody took keeps it, with the same fence.
	if held, _ := ls.Renew(ctx, "a", time.Minute, "channel:short"); len(held) != 1 {
		t.Fatalf("renew of a lapsed, untaken lease: %v", held)
	}
	if _, ok, _ := other.Acquire(ctx, "channel:short", "b", time.Minute); ok {
		t.Fatal("acquired a lease its holder had renewed")
	}
}
