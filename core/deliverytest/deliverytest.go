// Package deliverytest is the one conformance suite of core.DeliveryQueue.
// Every implementation (coretest.MemDeliveryQueue, store/sqlite,
// store/postgres) runs Run from its own tests.
package deliverytest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Run runs the suite; open returns an empty queue (a fresh one per call).
func Run(t *testing.T, open func(t *testing.T) core.DeliveryQueue) {
	t.Run("PutClaimAckRoundTrip", func(t *testing.T) { testRoundTrip(t, open(t)) })
	t.Run("PutKeepsTheFirst", func(t *testing.T) { testPutKeepsFirst(t, open(t)) })
	t.Run("ClaimHidesUntilLease", func(t *testing.T) { testClaimLease(t, open(t)) })
	t.Run("RetryBacksOff", func(t *testing.T) { testRetry(t, open(t)) })
	t.Run("PlatformsApart", func(t *testing.T) { testPlatforms(t, open(t)) })
	t.Run("ConcurrentClaimsDisjoint", func(t *testing.T) { testConcurrentClaims(t, open(t)) })
}

// t0 has nanoseconds: stores keep milliseconds at least.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func event(id, text string) core.Inbound {
	return core.Inbound{Event: &core.Event{
		Scope:      core.Scope{Platform: "discord", Workspace: "G1", Channel: "C1", Thread: "T1"},
		Visibility: core.Public, MessageID: id, Author: core.Person{ID: "U1", Name: "Zoë"},
		Text: text, Mentions: []core.Mention{{Kind: core.MentionUser, ID: "B1"}}, MentionsBot: true,
		At: t0.Add(-time.Second),
	}}
}

func delivery(key string, next time.Time) core.QueuedDelivery {
	return core.QueuedDelivery{
		Platform: "discord", Key: key, Inbound: event(key, "héllo <@B1> 😀 "+key),
		QueuedAt: t0, Deadline: t0.Add(24 * time.Hour), NextAt: next,
	}
}

func put(t *testing.T, q core.DeliveryQueue, d core.QueuedDelivery) {
	t.Helper()
	if err := q.Put(t.Context(), d); err != nil {
		t.Fatalf("put %s: %v", d.Key, err)
	}
}

func claim(t *testing.T, q core.DeliveryQueue, platform string, now time.Time, limit int) []core.QueuedDelivery {
	t.Helper()
	got, err := q.Claim(t.Context(), platform, now, time.Minute, limit)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return got
}

func keys(ds []core.QueuedDelivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Key)
	}
	return out
}

func backlog(t *testing.T, q core.DeliveryQueue, platform string) core.DeliveryBacklog {
	t.Helper()
	b, err := q.Backlog(t.Context(), platform)
	if err != nil {
		t.Fatalf("backlog: %v", err)
	}
	return b
}

func testRoundTrip(t *testing.T, q core.DeliveryQueue) {
	if got := claim(t, q, "discord", t0, 10); len(got) != 0 {
		t.Fatalf("claim of an empty queue: %v", keys(got))
	}
	if b := backlog(t, q, "discord"); b.Queued != 0 || !b.Oldest.IsZero() {
		t.Fatalf("backlog of an empty queue: %+v", b)
	}
	want := delivery("msg:1", t0.Add(time.Second))
	put(t, q, want)
	if got := claim(t, q, "discord", t0, 10); len(got) != 0 {
		t.Fatalf("claimed %v before it was due", keys(got))
	}
	got := claim(t, q, "discord", t0.Add(time.Second), 10)
	if len(got) != 1 {
		t.Fatalf("claimed %v when due, want msg:1", keys(got))
	}
	g := got[0]
	if g.Key != want.Key || g.Platform != want.Platform || g.Attempts != 0 || g.LastError != "" ||
		!g.QueuedAt.Equal(want.QueuedAt) || !g.Deadline.Equal(want.Deadline) {
		t.Fatalf("claimed %+v, want %+v", g, want)
	}
	if g.Inbound.Event == nil || g.Inbound.Click != nil {
		t.Fatalf("inbound came back as %+v", g.Inbound)
	}
	ev, wev := *g.Inbound.Event, *want.Inbound.Event
	if !ev.At.Equal(wev.At) {
		t.Fatalf("event time %v, want %v", ev.At, wev.At)
	}
	ev.At = wev.At
	if !reflect.DeepEqual(ev, wev) {
		t.Fatalf("event came back as %+v, want %+v", ev, wev)
	}
	if b := backlog(t, q, "discord"); b.Queued != 1 || !b.Oldest.Equal(t0) {
		t.Fatalf("backlog %+v, want 1 queued at %v", b, t0)
	}
	if err := q.Ack(t.Context(), "discord", "msg:1"); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(t.Context(), "discord", "msg:1"); err != nil {
		t.Fatalf("a second ack: %v", err)
	}
	if got := claim(t, q, "discord", t0.Add(time.Hour), 10); len(got) != 0 {
		t.Fatalf("claimed %v after the ack", keys(got))
	}
	if b := backlog(t, q, "discord"); b.Queued != 0 {
		t.Fatalf("backlog after the ack: %+v", b)
	}
	// A click round-trips too.
	click := core.QueuedDelivery{Platform: "discord", Key: "click:1", QueuedAt: t0, Deadline: t0.Add(time.Hour), NextAt: t0,
		Inbound: core.Inbound{Click: &core.CardClick{Scope: core.Scope{Platform: "discord", Channel: "C1"}, Token: "a.b", By: core.Person{ID: "U2"}, At: t0}}}
	put(t, q, click)
	got = claim(t, q, "discord", t0, 10)
	if len(got) != 1 || got[0].Inbound.Click == nil || got[0].Inbound.Event != nil || got[0].Inbound.Click.Token != "a.b" {
		t.Fatalf("click came back as %+v", got)
	}
}

func testPutKeepsFirst(t *testing.T, q core.DeliveryQueue) {
	first := delivery("msg:1", t0)
	put(t, q, first)
	again := delivery("msg:1", t0.Add(time.Hour))
	again.Deadline = t0.Add(48 * time.Hour)
	again.Inbound = event("msg:1", "changed")
	put(t, q, again)
	got := claim(t, q, "discord", t0, 10)
	if len(got) != 1 || !got[0].Deadline.Equal(first.Deadline) || got[0].Inbound.Event.Text != first.Inbound.Event.Text {
		t.Fatalf("after a second put: %+v, want the first unchanged", got)
	}
	if b := backlog(t, q, "discord"); b.Queued != 1 {
		t.Fatalf("backlog %+v, want one", b)
	}
}

func testClaimLease(t *testing.T, q core.DeliveryQueue) {
	for i := range 5 {
		put(t, q, delivery(fmt.Sprintf("msg:%d", i), t0.Add(time.Duration(i)*time.Millisecond)))
	}
	now := t0.Add(time.Second)
	got := claim(t, q, "discord", now, 2)
	if fmt.Sprint(keys(got)) != "[msg:0 msg:1]" {
		t.Fatalf("first claim %v, want the two due first", keys(got))
	}
	got = claim(t, q, "discord", now, 10)
	if fmt.Sprint(keys(got)) != "[msg:2 msg:3 msg:4]" {
		t.Fatalf("second claim %v, want the three not claimed", keys(got))
	}
	if got := claim(t, q, "discord", now.Add(time.Minute-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("claimed %v within the lease", keys(got))
	}
	if got := claim(t, q, "discord", now.Add(time.Minute), 10); len(got) != 5 {
		t.Fatalf("claimed %v after the lease, want all five again", keys(got))
	}
}

func testRetry(t *testing.T, q core.DeliveryQueue) {
	put(t, q, delivery("msg:1", t0))
	claim(t, q, "discord", t0, 10)
	if err := q.Retry(t.Context(), "discord", "msg:1", t0.Add(10*time.Second), "engine: journal down"); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, q, "discord", t0.Add(10*time.Second-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("claimed %v before the retry was due", keys(got))
	}
	if err := q.Retry(t.Context(), "discord", "msg:1", t0.Add(20*time.Second), "second"); err != nil {
		t.Fatal(err)
	}
	got := claim(t, q, "discord", t0.Add(20*time.Second), 10)
	if len(got) != 1 || got[0].Attempts != 2 || got[0].LastError != "second" {
		t.Fatalf("after two retries: %+v, want attempts 2 and the last error", got)
	}
	if err := q.Retry(t.Context(), "discord", "msg:none", t0, "x"); err != nil {
		t.Fatalf("retry of a key not queued: %v", err)
	}
}

func testPlatforms(t *testing.T, q core.DeliveryQueue) {
	put(t, q, delivery("msg:1", t0))
	other := delivery("msg:1", t0)
	other.Platform = "telegram"
	other.QueuedAt = t0.Add(time.Second)
	put(t, q, other)
	if got := claim(t, q, "telegram", t0, 10); len(got) != 1 || got[0].Platform != "telegram" {
		t.Fatalf("telegram claimed %+v", got)
	}
	if err := q.Ack(t.Context(), "telegram", "msg:1"); err != nil {
		t.Fatal(err)
	}
	if b := backlog(t, q, "discord"); b.Queued != 1 || !b.Oldest.Equal(t0) {
		t.Fatalf("discord's backlog after telegram's ack: %+v", b)
	}
	if b := backlog(t, q, "telegram"); b.Queued != 0 {
		t.Fatalf("telegram's backlog: %+v", b)
	}
}

func testConcurrentClaims(t *testing.T, q core.DeliveryQueue) {
	const n = 40
	for i := range n {
		put(t, q, delivery(fmt.Sprintf("msg:%02d", i), t0))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				got, err := q.Claim(t.Context(), "discord", t0, time.Minute, 3)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.Key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct deliveries claimed, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%s claimed %d times at once", k, c)
		}
	}
}
