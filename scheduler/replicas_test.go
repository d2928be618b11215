package scheduler_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/scheduler"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// barrier holds each routine.fired append until both replicas reach it (or
// a timeout), so the two schedulers decide the same slot at the same time:
// the case a lease cannot rule out (a stalled holder and its successor).
type barrier struct {
	mu sync.Mutex
	n  int
	ch chan struct{}
}

func (b *barrier) reset() { b.mu.Lock(); b.n, b.ch = 0, make(chan struct{}); b.mu.Unlock() }

func (b *barrier) arrive() {
	b.mu.Lock()
	b.n++
	ch := b.ch
	if b.n == 2 {
		close(ch)
	}
	b.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(3 * time.Second):
	}
}

type barrierJournal struct {
	core.Journal
	b *barrier
}

func (j barrierJournal) Append(ctx context.Context, drafts ...core.Draft) ([]core.Command, error) {
	if len(drafts) > 0 && drafts[0].Kind() == core.KindRoutineFired {
		j.b.arrive()
	}
	return j.Journal.Append(ctx, drafts...)
}

// Two schedulers with no lease at all, as two processes (their own pools,
// engines and surfaces) on one Postgres journal, decide every slot at the
// same instant: the (routine, slot) key lets one firing in, and only its
// scheduler posts.
func TestTwoSchedulersWithoutLeaseFireEachSlotOnce(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		url := testpg.New(t)
		signer := coretest.NewSigner(t)
		twoSchedulers(t, signer, func() core.Journal {
			st, err := postgres.Open(t.Context(), url, signer)
			if err != nil && strings.Contains(err.Error(), "pgvector") {
				t.Skipf("this server cannot hold the schema: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(st.Close)
			return st
		})
	})
	t.Run("memjournal", func(t *testing.T) {
		signer := coretest.NewSigner(t)
		j := coretest.NewMemJournal(signer)
		twoSchedulers(t, signer, func() core.Journal { return j })
	})
}

func twoSchedulers(t *testing.T, signer *core.Signer, open func() core.Journal) {
	clk := &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}
	bar := &barrier{}
	type replica struct {
		s   *coretest.FakeSurface
		sch *scheduler.Scheduler
	}
	var reps []replica
	_ = signer
	var store core.Journal
	for range 2 {
		st := open()
		store = st
		b := core.NewBoundary(clk.Now)
		j := barrierJournal{st, bar}
		sch, err := scheduler.New(scheduler.Config{Journal: j, Boundary: b, Clock: clk.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s := coretest.NewFakeSurface("test", "UBOT")
		e, err := engine.New(engine.Config{Journal: st, Boundary: b, Surfaces: map[string]core.Surface{"test": s},
			Router:  core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
			CardKey: []byte("routine-test-card-key-0123456789"), Clock: clk.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		sch.Bind(e)
		reps = append(reps, replica{s, sch})
	}
	b := core.NewBoundary(clk.Now)
	d, err := b.Human(alice, room, core.Meta{}, &core.RoutineCreated{RoutineID: "rtwo", Cron: "@every 10m", TZ: "UTC", Instruction: "digest", Owner: alice.ID, Armed: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	const slots = 4
	for i := 1; i <= slots; i++ {
		clk.Advance(10 * time.Minute)
		bar.reset()
		var wg sync.WaitGroup
		errs := make([]error, len(reps))
		for k, r := range reps {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = r.sch.Tick(t.Context()) }()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("slot %d, replica %d: %v", i, k, err)
			}
		}
	}
	cmds, err := store.Read(t.Context(), room.Key(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	fired := 0
	for _, c := range cmds {
		if c.Kind() == core.KindRoutineFired {
			fired++
		}
	}
	posts := 0
	for _, r := range reps {
		for _, p := range r.s.Posts() {
			if p.Out.Scope.Channel == room.Channel && p.Out.Scope.Thread == "" {
				posts++
			}
		}
	}
	if fired != slots || posts != slots {
		t.Fatalf("%d slots: %d routine.fired, %d posts across both replicas", slots, fired, posts)
	}
}
