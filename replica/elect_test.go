package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/replica"
)

// Two candidates on one lease table: one holds, the other waits; release
// hands over at once; a holder that cannot renew loses the election.
func TestElectorOneHolderAtATime(t *testing.T) {
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	a := replica.NewElector(j, "a", time.Second)
	b := replica.NewElector(j, "b", time.Second)
	heldA, releaseA, err := a.Acquire(t.Context(), "poller:1")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan context.Context, 1)
	var releaseB func()
	go func() {
		h, r, err := b.Acquire(t.Context(), "poller:1")
		if err == nil {
			releaseB = r
			got <- h
		}
	}()
	select {
	case <-got:
		t.Fatal("b was elected while a held the lease")
	case <-time.After(700 * time.Millisecond):
	}
	fa, _ := replica.ElectedFence(heldA)
	releaseA()
	var heldB context.Context
	select {
	case heldB = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("b was not elected after a released")
	}
	if fb, _ := replica.ElectedFence(heldB); fb.Token <= fa.Token {
		t.Fatalf("fence did not grow: a %d, b %d", fa.Token, fb.Token)
	}
	if heldA.Err() == nil {
		t.Fatal("a's held context outlived its release")
	}
	releaseB()

	// A holder whose renewals fail loses the election.
	c := replica.NewElector(renewFails{j}, "c", time.Second)
	heldC, releaseC, err := c.Acquire(t.Context(), "poller:2")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	select {
	case <-heldC.Done():
		if !errors.Is(heldC.Err(), context.Canceled) {
			t.Fatalf("held ended with %v", heldC.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a holder that cannot renew kept the election")
	}
}

// renewFails is a lease table this replica cannot renew in (it lost the
// database, say): its leases lapse while it still runs.
type renewFails struct{ core.Leases }

func (renewFails) Renew(context.Context, string, time.Duration, ...string) ([]string, error) {
	return nil, errors.New("connection refused")
}
