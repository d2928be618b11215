package engine_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// longChannel folds n messages of one channel, 250 a day, each with a
// model step of a run, and, with retention on (keep 30 days), each day the
// redaction of what turned 30 days old. It returns the fold.
func longChannel(tb testing.TB, n int) (*fold.Channel, uint64) {
	tb.Helper()
	ctx := context.Background()
	clk := &clock{t: time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	j := coretest.NewMemJournal(coretest.NewSigner(tb))
	sc := chanScope("LONG")
	f := fold.NewChannel(sc.Key())
	apply := func(cmds []core.Command) {
		for _, c := range cmds {
			if err := f.Apply(c); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var byDay [][]core.Command
	var today []core.Command
	for i := range n {
		if i > 0 && i%250 == 0 {
			clk.Advance(24 * time.Hour)
			byDay, today = append(byDay, today), nil
			if d := len(byDay) - 30; d >= 0 { // retention: 30 days
				for _, c := range byDay[d] {
					rd, err := b.System("retention", sc, core.Meta{Cause: c.ID()}, &core.CommandRedacted{Seq: c.Seq(), ID: c.ID(), Reason: "retention", TargetKind: c.Kind().String()})
					if err != nil {
						tb.Fatal(err)
					}
					r, err := j.Redact(ctx, c.Seq(), rd)
					if err != nil {
						tb.Fatal(err)
					}
					apply([]core.Command{r})
				}
				byDay[d] = nil
			}
		}
		m, err := b.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: "M" + strconv.Itoa(i), Author: alice, Visibility: core.Public, Text: fmt.Sprintf("message %d", i)})
		if err != nil {
			tb.Fatal(err)
		}
		st, err := b.Agent("R"+strconv.Itoa(i%50), sc, core.Meta{}, &core.ModelStep{Usage: core.Usage{InputTokens: 10, OutputTokens: 2}})
		if err != nil {
			tb.Fatal(err)
		}
		cmds, err := j.Append(ctx, m, st)
		if err != nil {
			tb.Fatal(err)
		}
		apply(cmds)
		today = append(today, cmds...)
	}
	return &f, f.Seq()
}

// The fold's per-channel maps stay bounded in a long channel with
// retention on: delivered ids (seen), days of token use and listed
// redactions no longer grow with the channel's age.
func TestFoldMapsStayBoundedInALongChannel(t *testing.T) {
	const messages = 20_000 // 80 days
	f, _ := longChannel(t, messages)
	st := f.State()
	if n := len(st.Redacted); n > 4096 {
		t.Errorf("%d redacted seqs listed, want at most 4096", n)
	}
	if f.Delivered("M0") {
		t.Errorf("the first message id of %d is still kept for redelivery dedupe", messages)
	}
	if !f.Delivered(fmt.Sprintf("M%d", messages-1)) || !f.Delivered(fmt.Sprintf("M%d", messages-16_000)) {
		t.Error("the newest message ids are not kept")
	}
	for d := range 80 - 62 {
		if n := f.TokensOn(time.Date(2024, 1, 1+d, 12, 0, 0, 0, time.UTC)); n != 0 {
			t.Fatalf("day %d of 80: %d tokens still kept", d, n)
		}
	}
	if f.TokensOn(time.Date(2024, 1, 80, 12, 0, 0, 0, time.UTC)) == 0 {
		t.Error("the newest day's tokens are not kept")
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of a %d-command channel: %d bytes", f.Seq(), len(snap))
}

// BenchmarkFoldSizeWithRetention reports the snapshot size of a long
// channel with retention on (MARLOWE_BENCH_FOLD_MESSAGES messages, default
// 100,000: with their model steps and retention's redactions about 2.6
// commands each).
//
//	MARLOWE_BENCH_FOLD_MESSAGES=400000 go test -run '^$' -bench FoldSizeWithRetention -benchtime 1x ./engine/
func BenchmarkFoldSizeWithRetention(b *testing.B) {
	n := 100_000
	if s := os.Getenv("MARLOWE_BENCH_FOLD_MESSAGES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	for range b.N {
		f, seq := longChannel(b, n)
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(snap)), "snapshot-bytes")
		b.ReportMetric(float64(seq), "commands")
	}
}
