package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/scheduler"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// BenchmarkSchedulerTick measures one routine pass (Scheduler.Tick) over
// a PostgreSQL journal of 200 routine channels of 10k commands each (a
// routine, then people's messages), with no slot due: what every 10 s
// costs. Opt-in (it seeds 2M commands):
//
//	MARLOWE_BENCH_LARGE=1 go test -run '^$' -bench SchedulerTick -benchtime 5x ./cmd/bot/
//
// MARLOWE_BENCH_PER_CHANNEL sets the channels' length (default 10k).
//
// Metrics: ns/op (a pass after the first), first-pass-ms (the first pass
// of a new scheduler, which reads every channel once) and rows (commands
// in the journal).
func BenchmarkSchedulerTick(b *testing.B) {
	if os.Getenv("MARLOWE_BENCH_LARGE") != "1" {
		b.Skip("set MARLOWE_BENCH_LARGE=1 to seed 200 routine channels of 10k commands and measure a routine pass")
	}
	const channels = 200
	perChannel := benchEnvInt("MARLOWE_BENCH_PER_CHANNEL", 10_000) // another length: is the pass independent of it?
	url := testpg.New(b)
	signer := coretest.NewSigner(b)
	st, err := postgres.Open(b.Context(), url, signer)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	created := time.Now().Add(-2 * time.Hour)
	text := strings.Repeat("Lorem ipsum dolor sit amet. ", 4)
	start := time.Now()
	rows := copyChannels(b, url, channels, func(ci int) (seededHead, []core.Record, error) {
		return seedRoutineChannel(signer, ci, perChannel, created, text)
	})
	b.Logf("seeded %d commands in %s", rows, time.Since(start).Round(time.Millisecond))
	// The routines fire hourly at :00 from creation, and the pass is at
	// creation + 90 minutes with the last slot fired: nothing is due.
	now := created.Add(90 * time.Minute)
	bd := core.NewBoundary(func() time.Time { return now })
	s, err := scheduler.New(scheduler.Config{Journal: st, Boundary: bd, Clock: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := s.Tick(b.Context()); err != nil {
		b.Fatal(err)
	}
	first := time.Since(t0)
	b.ResetTimer()
	for b.Loop() {
		if err := s.Tick(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(first.Milliseconds()), "first-pass-ms")
	b.ReportMetric(float64(rows), "rows")
}

// seedRoutineChannel builds one channel: an armed hourly routine, its
// firing of the slot an hour after creation (delivered), and people's
// messages.
func seedRoutineChannel(signer *core.Signer, ci, rows int, created time.Time, text string) (seededHead, []core.Record, error) {
	at := created
	bd := core.NewBoundary(func() time.Time { return at })
	sc := core.Scope{Platform: "slack", Workspace: "T1", Channel: fmt.Sprintf("C%04d", ci)}
	ann := core.Person{ID: fmt.Sprintf("U%03d", ci%97), Name: "Ann"}
	res := seededHead{ch: sc.Key()}
	var out []core.Record
	var prev core.Hash
	add := func(d core.Draft, err error) error {
		if err != nil {
			return err
		}
		c, err := signer.Seal(d, uint64(len(out)+1), prev)
		if err != nil {
			return err
		}
		prev = c.Hash()
		out = append(out, c.Record())
		return nil
	}
	if err := add(bd.Human(ann, sc, core.Meta{}, &core.RoutineCreated{RoutineID: fmt.Sprintf("r%04d", ci), Cron: "@every 1h", TZ: "UTC",
		Instruction: "digest", Owner: ann.ID, Armed: true})); err != nil {
		return res, nil, err
	}
	step := 80 * time.Minute / time.Duration(rows)
	for len(out) < rows {
		at = at.Add(step)
		if len(out) == rows/2 {
			slot := created.Add(time.Hour)
			fired, err := bd.SystemKeyed("scheduler", "routine.fired:"+fmt.Sprintf("r%04d", ci)+":"+slot.Format(time.RFC3339Nano), slot, sc, core.Meta{},
				&core.RoutineFired{RoutineID: fmt.Sprintf("r%04d", ci), Slot: slot, Outcome: scheduler.OutcomeFired})
			if err := add(fired, err); err != nil {
				return res, nil, err
			}
			if err := add(bd.System("engine", sc, core.Meta{Cause: fired.ID()}, &core.MessagePosted{EffectID: "fx" + fired.ID(),
				MessageID: "B" + fired.ID(), Role: core.RoleMessage, Text: "digest"})); err != nil {
				return res, nil, err
			}
			continue
		}
		if err := add(bd.Human(ann, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("M%04d-%05d", ci, len(out)), Author: ann,
			Visibility: core.Public, Text: text})); err != nil {
			return res, nil, err
		}
	}
	res.seq, res.hash = uint64(len(out)), prev
	return res, out, nil
}
