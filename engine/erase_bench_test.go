package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// BenchmarkForgetMeLarge measures one `forget me` job on a large SQLite
// journal: MARLOWE_BENCH_ERASE_ROWS commands (default 100,000) in 50
// channels, 1% of them the person's messages (sentences of 20 random
// words), the rest other people's messages and the bot's answers, one in
// 20 answers quoting one of hers. The job finds her messages through the
// journal's author index (core.AuthorIndex), reads every row once for
// their copies, decoding each payload once whatever the number of her
// texts (core.TextMatcher), and writes its redactions 500 to a
// transaction (core.BatchRedactor).
//
//	MARLOWE_BENCH_ERASE_ROWS=1000000 go test -run '^$' -bench 'ForgetMeLarge$' -benchtime 1x ./engine/
func BenchmarkForgetMeLarge(b *testing.B) {
	st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "j.db"), signerFor(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	benchForgetMe(b, st)
}

// BenchmarkForgetMeLargePostgres is BenchmarkForgetMeLarge on PostgreSQL
// (MARLOWE_TEST_DATABASE_URL; a database of its own).
//
//	MARLOWE_BENCH_ERASE_ROWS=1000000 go test -run '^$' -bench ForgetMeLargePostgres -benchtime 1x ./engine/
func BenchmarkForgetMeLargePostgres(b *testing.B) {
	st, err := postgres.Open(b.Context(), testpg.New(b), signerFor(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	benchForgetMe(b, st)
}

func signerFor(b *testing.B) *core.Signer { return coretest.NewSigner(b) }

func benchForgetMe(b *testing.B, st core.Journal) {
	rows := 100_000
	if s := os.Getenv("MARLOWE_BENCH_ERASE_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	bd := core.NewBoundary(clk.Now)
	const channels = 50
	start := time.Now()
	sentence := func(i int) string {
		r := rand.New(rand.NewPCG(uint64(i), 11))
		s := ""
		for range 20 {
			s += strconv.FormatUint(r.Uint64()%1_000_003, 36) + " "
		}
		return s
	}
	// Channels are seeded side by side: each is one chain, appended 2,000
	// commands to a transaction.
	var hers atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, channels)
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for c := range channels {
		wg.Add(1)
		slots <- struct{}{}
		go func() (err error) {
			defer func() { errs[c] = err; <-slots; wg.Done() }()
			sc := chanScope(fmt.Sprintf("B%d", c))
			var batch []core.Draft
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				_, err := st.Append(ctx, batch...)
				batch = batch[:0]
				return err
			}
			for i := range rows / channels {
				n := c*(rows/channels) + i
				var d core.Draft
				var err error
				switch {
				case n%100 == 0:
					hers.Add(1)
					d, err = bd.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("A%d", n), Author: alice, Visibility: core.Public, Text: "alice " + sentence(n)})
				case n%100 == 1 && n%2000 == 1:
					d, err = bd.Agent("R", sc, core.Meta{}, &core.MessagePosted{EffectID: fmt.Sprintf("e%d", n), MessageID: fmt.Sprintf("P%d", n), Role: core.RoleAnswer, Text: "you said: " + sentence(n-1)})
				case n%2 == 0:
					d, err = bd.Human(bob, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("M%d", n), Author: bob, Visibility: core.Public, Text: "bob " + sentence(n)})
				default:
					d, err = bd.Agent("R", sc, core.Meta{}, &core.MessagePosted{EffectID: fmt.Sprintf("e%d", n), MessageID: fmt.Sprintf("P%d", n), Role: core.RoleAnswer, Text: "ok " + sentence(n)})
				}
				if err != nil {
					return err
				}
				batch = append(batch, d)
				if len(batch) == 2000 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			return flush()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d commands (%d of hers) in %d channels in %s", rows, hers.Load(), channels, time.Since(start).Round(time.Millisecond))
	e := eraseEngine(b, st, bd, clk)
	b.ResetTimer()
	for range b.N {
		n, err := engine.ErasePerson(ctx, e, platform, alice.ID)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "redacted")
	}
}

// eraseEngine is an engine over j for the erasure tests and benchmarks:
// no model, every message routed, closed on tb's cleanup.
func eraseEngine(tb testing.TB, j core.Journal, b *core.Boundary, clk *clock) *engine.Engine {
	tb.Helper()
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: b, CardKey: cardKey, Clock: clk.Now,
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close() })
	return e
}
