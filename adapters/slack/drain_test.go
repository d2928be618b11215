package slack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Told to stop (SIGTERM) with envelopes queued in a channel's lane behind
// a slow delivery, Run still delivers every one of them, in order, within
// the drain timeout, before it returns. The old Run skipped what was
// queued once its context ended.
func TestSocketStopDrainsQueuedEnvelopes(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	release := make(chan struct{})
	rec := newRecorder()
	rec.setHook(func(ctx context.Context, _ int, in core.Inbound) error {
		if in.Event != nil && in.Event.Text == "hold" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, rec.deliver) }()
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("adapter did not connect")
	}
	f.Say(chPublic, "", alice, "hold")
	waitUntil(t, 3*time.Second, "the held delivery", func() bool { return rec.callCount() >= 1 })
	const queued = 5
	for i := range queued {
		f.Say(chPublic, "", alice, fmt.Sprintf("queued %d", i))
	}
	waitUntil(t, 3*time.Second, "the envelopes queued behind it", func() bool {
		jobs := a.socketJobs.Load()
		return jobs != nil && jobs.Len() == queued+1
	})
	cancel() // SIGTERM
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within its drain")
	}
	var got []string
	for _, ev := range rec.events() {
		got = append(got, ev.Text)
	}
	want := []string{"hold"}
	for i := range queued {
		want = append(want, fmt.Sprintf("queued %d", i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}
