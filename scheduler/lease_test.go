package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/replica"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// passJournal counts the passes one replica makes (each starts by listing
// channels).
type passJournal struct {
	core.Journal
	passes *atomic.Int64
}

func (j passJournal) Channels(ctx context.Context) ([]core.ChannelKey, error) {
	j.passes.Add(1)
	return j.Journal.Channels(ctx)
}

// Two replicas electing through the lease table: only the holder makes
// passes, and every slot fires once.
func TestTwoReplicasOneLeaseOneFiringPerSlot(t *testing.T) {
	w := newWorld(t)
	routineID(t, w.say(alice, "routine add @every 10m: digest"))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	passes := make([]*atomic.Int64, 2)
	for i := range passes {
		passes[i] = &atomic.Int64{}
		s, err := scheduler.New(scheduler.Config{
			Journal: passJournal{w.j, passes[i]}, Boundary: w.b, Clock: w.clk.Now, Tick: 2 * time.Millisecond,
			Lease: replica.NewElector(w.j, fmt.Sprintf("r%d", i), 15*time.Second), Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Bind(w.e)
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Run(ctx) }()
	}
	for i := 1; i <= 5; i++ {
		w.clk.Advance(10 * time.Minute)
		coretest.WaitFor(t, 10*time.Second, "a firing", func() bool { return len(w.digests()) == i })
	}
	cancel()
	wg.Wait()
	if n := len(w.fired()); n != 5 {
		t.Fatalf("%d firings for 5 slots", n)
	}
	a, b := passes[0].Load(), passes[1].Load()
	if (a == 0) == (b == 0) {
		t.Fatalf("passes: replica A %d, replica B %d; want exactly one replica passing", a, b)
	}
}
