package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
)

// longChannel folds n messages of one channel, 250 a day, each the
// trigger of a run in its own thread (started, one model step, every
// eighth asking for and getting an approval, completed), and, with
// retention on (keep 30 days), each day the redaction of what turned 30
// days old. It returns the fold.
func longChannel(tb testing.TB, n int) (*fold.Channel, uint64) {
	tb.Helper()
	return longHistory(tb, n, nil)
}

// longHistory is longChannel that also hands each command, in journal
// order, to each (nil: none).
func longHistory(tb testing.TB, n int, each func(core.Command)) (*fold.Channel, uint64) {
	tb.Helper()
	return longHistoryBounded(tb, n, 250, fold.DefaultBounds(), each)
}

// longHistoryBounded is longHistory with perDay messages a day, folded
// with bounds: a tenth of the default caps reach every bound in a tenth of
// the history (signing each command is most of the cost, many times more
// under -race).
func longHistoryBounded(tb testing.TB, n, perDay int, bounds fold.Bounds, each func(core.Command)) (*fold.Channel, uint64) {
	tb.Helper()
	ctx := context.Background()
	clk := &clock{t: time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	j := coretest.NewMemJournal(coretest.NewSigner(tb))
	sc := chanScope("LONG")
	f := fold.NewChannelBounded(sc.Key(), bounds)
	apply := func(cmds []core.Command) {
		for _, c := range cmds {
			if err := f.Apply(c); err != nil {
				tb.Fatal(err)
			}
			if each != nil {
				each(c)
			}
		}
	}
	must := func(d core.Draft, err error) core.Draft {
		if err != nil {
			tb.Fatal(err)
		}
		return d
	}
	var byDay [][]core.Command
	var today []core.Command
	for i := range n {
		if i > 0 && i%perDay == 0 {
			clk.Advance(24 * time.Hour)
			byDay, today = append(byDay, today), nil
			if d := len(byDay) - 30; d >= 0 { // retention: 30 days
				for _, c := range byDay[d] {
					rd := must(b.System("retention", sc, core.Meta{Cause: c.ID()}, &core.CommandRedacted{Seq: c.Seq(), ID: c.ID(), Reason: "retention", TargetKind: c.Kind().String()}))
					r, err := j.Redact(ctx, c.Seq(), rd)
					if err != nil {
						tb.Fatal(err)
					}
					apply([]core.Command{r})
				}
				byDay[d] = nil
			}
		}
		id, msg := "R"+strconv.Itoa(i), "M"+strconv.Itoa(i)
		th := sc
		th.Thread = msg
		drafts := []core.Draft{
			must(b.Human(alice, sc, core.Meta{Run: id}, &core.MessageReceived{MessageID: msg, Author: alice, Visibility: core.Public, Text: fmt.Sprintf("message %d", i)})),
			must(b.Agent(id, th, core.Meta{Run: id}, &core.RunStarted{Trigger: msg})),
			must(b.Agent(id, th, core.Meta{Run: id}, &core.ModelStep{Usage: core.Usage{InputTokens: 10, OutputTokens: 2}})),
		}
		if i%8 == 0 {
			drafts = append(drafts,
				must(b.Agent(id, th, core.Meta{Run: id}, &core.ApprovalRequested{ApprovalID: "A" + strconv.Itoa(i), Tool: "post", Requester: alice.ID, ExpiresAt: clk.Now().Add(time.Hour)})),
				must(b.Human(alice, th, core.Meta{Run: id}, &core.ApprovalResolved{ApprovalID: "A" + strconv.Itoa(i), Decision: "approved", By: alice})))
		}
		drafts = append(drafts, must(b.Agent(id, th, core.Meta{Run: id}, &core.RunCompleted{})))
		cmds, err := j.Append(ctx, drafts...)
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
	// A tenth of the default caps, and of the messages a day: 80 days,
	// past every cap, as the default caps are past in 20,000 messages.
	const messages, perDay = 2_000, 25
	bounds := fold.Bounds{FinishedRuns: 102, SeenMessages: 1640, TokenDays: 62, RedactedListed: 410}
	f, _ := longHistoryBounded(t, messages, perDay, bounds, nil)
	st := f.State()
	if n := len(st.Redacted); n > bounds.RedactedListed {
		t.Errorf("%d redacted seqs listed, want at most %d", n, bounds.RedactedListed)
	}
	if f.Delivered("M0") {
		t.Errorf("the first message id of %d is still kept for redelivery dedupe", messages)
	}
	if !f.Delivered(fmt.Sprintf("M%d", messages-1)) || !f.Delivered(fmt.Sprintf("M%d", messages-1_600)) {
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
	// Finished runs and their decided approvals leave the fold once
	// FinishedRuns to twice that many newer runs have ended; the newest
	// stay, as does the thread's pointer to its latest run.
	if n := len(st.Runs); n > 2*bounds.FinishedRuns {
		t.Errorf("%d runs kept of %d finished, want at most %d", n, messages, 2*bounds.FinishedRuns)
	}
	if n := len(st.Approvals); n > 2*bounds.FinishedRuns/8+1 {
		t.Errorf("%d approvals kept, want at most those of the kept runs", n)
	}
	if f.Run("R0") != nil || f.Approval("A0") != nil {
		t.Error("the first run and its approval are still in the fold")
	}
	if _, ok := f.ThreadRun("M0"); ok {
		t.Error("the first thread still points at its dropped run")
	}
	last := strconv.Itoa(messages - 8)
	if f.Run("R"+last) == nil || f.Approval("A"+last) == nil {
		t.Error("the newest runs and approvals are not kept")
	}
	if id, ok := f.ThreadRun("M" + last); !ok || id != "R"+last {
		t.Errorf("the newest thread's run is %q, %v", id, ok)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of a %d-command channel: %d bytes", f.Seq(), len(snap))
}

// Checkpoints stay exact while finished runs leave the fold: a snapshot
// taken anywhere in a channel long enough to drop runs, restored and
// folded on, dumps as the whole fold does (the order runs ended in is in
// the snapshot, so the restored fold drops the same runs later).
func TestCheckpointsStayExactWhileRunsLeaveTheFold(t *testing.T) {
	var journal []core.Command
	f, _ := longHistory(t, 3_000, func(c core.Command) { journal = append(journal, c) })
	if f.Run("R0") != nil {
		t.Fatal("the history is too short to drop a run")
	}
	st, internal, err := f.Dump()
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshots(t, "long channel", rand.New(rand.NewPCG(1, 2)), f.Key(), journal, engine.FoldDump{State: st, Engine: internal})
}

// BenchmarkFoldSizeWithRetention reports the fold's size after a long
// channel with retention on: MARLOWE_BENCH_FOLD_COMMANDS commands (default
// a million; a message with its run and retention's redactions is about
// seven), built through an in-memory journal straight into the fold.
// snapshot-bytes is what every checkpoint of the channel carries; runs,
// approvals and redacted are the entries of the maps that used to grow
// with the channel's age.
//
//	go test -run '^$' -bench FoldSizeWithRetention -benchtime 1x ./engine/
func BenchmarkFoldSizeWithRetention(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("MARLOWE_BENCH_FOLD_COMMANDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	for range b.N {
		f, seq := longChannel(b, n/7)
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		st := f.State()
		b.ReportMetric(float64(len(snap)), "snapshot-bytes")
		b.ReportMetric(float64(seq), "commands")
		b.ReportMetric(float64(len(st.Runs)), "runs")
		b.ReportMetric(float64(len(st.Approvals)), "approvals")
		b.ReportMetric(float64(len(st.Redacted)), "redacted")
	}
}
