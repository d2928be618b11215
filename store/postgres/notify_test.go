package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// An unfenced append (a replica journaling what it received) notifies the
// channel's owner; a fenced one (the owner's own drive) notifies nobody:
// only the lease holder acts on a notification.
func TestOnlyUnfencedAppendsNotify(t *testing.T) {
	t.Parallel()
	signer := coretest.NewSigner(t)
	url := testpg.New(t)
	s := open(t, url, signer)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	got := map[uint64]bool{}
	ready := make(chan struct{}, 1)
	go s.Listen(ctx, func(ch core.ChannelKey, seq uint64) {
		if ch == "" {
			ready <- struct{}{}
			return
		}
		mu.Lock()
		got[seq] = true
		mu.Unlock()
	}, nil)
	<-ready
	sc := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}
	b := core.NewBoundary(nil)
	msg := func(text string) core.Draft {
		d, err := b.Human(core.Person{ID: "U1"}, sc, core.Meta{}, &core.MessageReceived{MessageID: text, Author: core.Person{ID: "U1"}, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	f, ok, err := s.Acquire(ctx, core.ChannelLease(sc.Key()), "owner", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, err := s.AppendAt(ctx, core.Expect{Head: 0}, msg("received")); err != nil { // seq 1
		t.Fatal(err)
	}
	// seq 2: fenced, by the writer that knows the head (one round trip).
	if _, err := s.AppendAt(ctx, core.Expect{Head: 1, Fence: &f}, msg("step")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, msg("unfenced")); err != nil { // seq 3
		t.Fatal(err)
	}
	// seq 4: fenced, by a store that must lock and read the head first.
	if _, err := open(t, url, signer).AppendAt(ctx, core.Expect{Head: 3, Fence: &f}, msg("step again")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, msg("last")); err != nil { // seq 5
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := got[5]
		mu.Unlock()
		if n || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for seq, want := range map[uint64]bool{1: true, 2: false, 3: true, 4: false, 5: true} {
		if got[seq] != want {
			t.Errorf("seq %d notified = %v, want %v (got %v)", seq, got[seq], want, got)
		}
	}
}
