package telegram

import (
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/replica"
	redisstore "github.com/marlowe-bot/marlowe/store/redis"
)

// Two replicas polling one token: electing through one lease table, exactly one
// polls (Telegram never sees concurrent getUpdates) and every update is
// delivered once; stopping the holder hands polling to the other.
func TestTwoReplicasOnePoller(t *testing.T) {
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	f := newFake(t, func(cfg *telegramfake.Config) { cfg.MaxPollWait = 200 * time.Millisecond })
	dd := redisstore.NewDeduper(c, prefix)
	leases := coretest.NewMemJournal(coretest.NewSigner(t))
	lease := func() Option { return WithLease(replica.NewElector(leases, "poller", time.Second)) }
	cfg := testConfig(f, ModePolling)
	cfg.PollTimeout = time.Second
	a1, _ := newAdapter(t, cfg, lease(), WithDeduper(dd))
	a2, _ := newAdapter(t, cfg, lease(), WithDeduper(dd))
	rec := newRecorder()
	stop1 := run(t, a1, rec.deliver)
	run(t, a2, rec.deliver)

	for i := range 20 {
		f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "m" + itoa(int64(i))})
	}
	rec.await(t, "20 deliveries", func() bool { return len(rec.events()) >= 20 })
	stop1() // the holder goes away (or the other one, if it held the lease)
	for i := range 5 {
		f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "after" + itoa(int64(i))})
	}
	rec.await(t, "25 deliveries", func() bool { return len(rec.events()) >= 25 })
	awaitFake(t, f, "all confirmed", func() bool { return len(f.Pending()) == 0 })
	if n := rec.callCount(); n != 25 {
		t.Fatalf("%d deliveries of 25 updates", n)
	}
	if n := f.Conflicts(); n != 0 {
		t.Fatalf("%d concurrent getUpdates: two replicas polled at once", n)
	}
}

// The control: without a shared lease, two processes do poll at once and
// Telegram refuses one of them (the fake as Telegram does).
func TestTwoPollersWithoutLeaseConflict(t *testing.T) {
	f := newFake(t)
	polling(t, f)
	polling(t, f)
	awaitFake(t, f, "a 409", func() bool { return f.Conflicts() > 0 })
}
