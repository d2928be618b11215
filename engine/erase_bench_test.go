package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// BenchmarkForgetMeLarge measures one `forget me` job on a large SQLite
// journal: MARLOWE_BENCH_ERASE_ROWS commands (default 100,000) in 50
// channels, 1% of them the person's messages (sentences of 20 random
// words), the rest other people's messages and the bot's answers, one in
// 20 answers quoting one of hers. The job reads every row twice (her texts,
// then their copies) and decodes each payload once, whatever the number of
// her texts (core.TextMatcher).
//
//	MARLOWE_BENCH_ERASE_ROWS=1000000 go test -run '^$' -bench ForgetMeLarge -benchtime 1x ./engine/
func BenchmarkForgetMeLarge(b *testing.B) {
	rows := 100_000
	if s := os.Getenv("MARLOWE_BENCH_ERASE_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	ctx := context.Background()
	signer := coretest.NewSigner(b)
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "j.db"), signer)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	bd := core.NewBoundary(clk.Now)
	const channels = 50
	start := time.Now()
	hers := 0
	sentence := func(i int) string {
		r := rand.New(rand.NewPCG(uint64(i), 11))
		s := ""
		for range 20 {
			s += strconv.FormatUint(r.Uint64()%1_000_003, 36) + " "
		}
		return s
	}
	for c := range channels {
		sc := chanScope(fmt.Sprintf("B%d", c))
		var batch []core.Draft
		flush := func() {
			if len(batch) > 0 {
				if _, err := st.Append(ctx, batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		for i := range rows / channels {
			n := c*(rows/channels) + i
			var d core.Draft
			var err error
			switch {
			case n%100 == 0:
				hers++
				d, err = bd.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("A%d", n), Author: alice, Visibility: core.Public, Text: "alice " + sentence(n)})
			case n%100 == 1 && n%2000 == 1:
				d, err = bd.Agent("R", sc, core.Meta{}, &core.MessagePosted{EffectID: fmt.Sprintf("e%d", n), MessageID: fmt.Sprintf("P%d", n), Role: core.RoleAnswer, Text: "you said: " + sentence(n-1)})
			case n%2 == 0:
				d, err = bd.Human(bob, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("M%d", n), Author: bob, Visibility: core.Public, Text: "bob " + sentence(n)})
			default:
				d, err = bd.Agent("R", sc, core.Meta{}, &core.MessagePosted{EffectID: fmt.Sprintf("e%d", n), MessageID: fmt.Sprintf("P%d", n), Role: core.RoleAnswer, Text: "ok " + sentence(n)})
			}
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, d)
			if len(batch) == 1000 {
				flush()
			}
		}
		flush()
	}
	b.Logf("seeded %d commands (%d of hers) in %d channels in %s", rows, hers, channels, time.Since(start).Round(time.Millisecond))
	e, err := engine.New(engine.Config{
		Journal: st, Boundary: bd, CardKey: cardKey, Clock: clk.Now,
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.ResetTimer()
	for range b.N {
		n, err := engine.ErasePerson(ctx, e, platform, alice.ID)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "redacted")
	}
}
