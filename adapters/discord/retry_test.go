package discord

import (
	"fmt"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// fastRetries makes the delivery queue poll and back off in milliseconds.
func fastRetries(a *Adapter) {
	a.retry.poll, a.retry.base, a.retry.maxWait = 5*time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
}

// await polls cond until it holds (a counter the adapter bumps when it is
// done with something), failing after 10 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A message whose delivery fails past deliverOnce's three tries is not
// dropped: it waits in the delivery queue and is delivered, once, when
// deliver recovers; a RESUME that replays it afterwards does not deliver
// it again (the retry committed the same dedupe key).
func TestFailingDeliveryIsQueuedAndDeliveredOnRecovery(t *testing.T) {
	f := newFake(t, discordfake.Config{ReplayOverlap: 5})
	rec := newRecorder()
	rec.fail = 6 // three live tries, then three queued ones
	q := coretest.NewMemDeliveryQueue()
	a := startAdapterSetup(t, f, Config{}, rec.deliver, fastRetries, WithDeliveryQueue(q, time.Hour))
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "do not lose me"})
	rec.waitFor(t, "the message, after the queue's retries", func() bool {
		_, ok := rec.eventByText("do not lose me")
		return ok
	})
	// Counted once the delivery returned and was acked: awaited, not read.
	await(t, "the redelivery counted", func() bool { return a.DeliveryRetryStats().Redelivered >= 1 })
	st := a.DeliveryRetryStats()
	if st.Queued != 1 || st.Redelivered != 1 || st.Failed < 1 || st.Expired != 0 {
		t.Errorf("retry stats %+v, want queued 1, redelivered 1, some failed retries, none expired", st)
	}
	await(t, "the queue emptied", func() bool {
		b, err := a.DeliveryBacklog(t.Context())
		return err == nil && b.Queued == 0
	})

	f.Drop() // the RESUME replays the overlap, the queued message among it
	if !f.Wait(10*time.Second, func() bool {
		rs := f.ResumesLocked()
		return len(rs) == 1 && rs[0].Accepted
	}) {
		t.Fatalf("no accepted RESUME: %+v", f.Resumes())
	}
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "after"})
	rec.waitFor(t, "after", func() bool { _, ok := rec.eventByText("after"); return ok })
	var got []string
	for _, e := range rec.events() {
		got = append(got, e.Text)
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{"do not lose me", "after"}) {
		t.Fatalf("delivered %q, want each once", got)
	}
}

// A queued message survives the adapter: another one (a restarted process,
// another replica) on the same queue delivers it.
func TestQueuedDeliveryOutlivesTheAdapter(t *testing.T) {
	f := newFake(t, discordfake.Config{MultiSession: true})
	q := coretest.NewMemDeliveryQueue()
	down := newRecorder()
	down.fail = 1 << 30
	first := startAdapterSetup(t, f, Config{}, down.deliver, func(a *Adapter) {
		fastRetries(a)
		a.retry.poll = time.Hour // this one never retries
	}, WithDeliveryQueue(q, time.Hour))
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "queued"})
	await(t, "the message queued", func() bool { return first.DeliveryRetryStats().Queued == 1 })

	rec := newRecorder()
	second := startAdapterSetup(t, f, Config{}, rec.deliver, fastRetries, WithDeliveryQueue(q, time.Hour))
	rec.waitFor(t, "the queued message, by the second adapter", func() bool {
		_, ok := rec.eventByText("queued")
		return ok
	})
	// The stat is counted once the delivery returned: awaited, not read.
	await(t, "the second adapter counting one redelivery", func() bool { return second.DeliveryRetryStats().Redelivered == 1 })
	if st := second.DeliveryRetryStats(); st.Redelivered != 1 || len(rec.events()) != 1 {
		t.Errorf("second adapter's stats %+v, events %d: want one redelivered, once", st, len(rec.events()))
	}
}

// A delivery that still fails at its deadline is given up visibly: counted
// as expired and taken off the queue, not retried for ever.
func TestQueuedDeliveryExpiresVisibly(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	rec.fail = 1 << 30
	q := coretest.NewMemDeliveryQueue()
	a := startAdapterSetup(t, f, Config{}, rec.deliver, fastRetries, WithDeliveryQueue(q, 30*time.Millisecond))
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "never deliverable"})
	await(t, "the delivery given up", func() bool { return a.DeliveryRetryStats().Expired == 1 })
	if b, err := a.DeliveryBacklog(t.Context()); err != nil || b.Queued != 0 {
		t.Fatalf("backlog %+v %v after the deadline, want empty", b, err)
	}
	if st := a.DeliveryRetryStats(); st.Queued != 1 {
		t.Fatalf("stats %+v", st)
	}
}
