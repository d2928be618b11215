package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// BenchmarkChannelLoad: what touching a channel of 100k commands costs
// after a restart (or an eviction, a takeover), folding it whole versus
// restoring its checkpoint (taken 100 commands before the head) and
// folding the rest. The history is turns of a person's message, a run of
// three model steps, its answer and its end.
//
//	go test -run '^$' -bench ChannelLoad -benchtime 5x ./engine/
func BenchmarkChannelLoad(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		st, signer, sc := checkpointedJournal(b, n)
		for _, tc := range []struct {
			name string
			j    core.Journal
		}{
			{"whole", &plainJournal{Journal: st}}, // no checkpoint read: folds from seq 1
			{"checkpoint", st},
		} {
			b.Run(fmt.Sprintf("%s/%dk", tc.name, n/1000), func(b *testing.B) {
				ctx := b.Context()
				for b.Loop() {
					e, err := engine.New(engine.Config{
						Journal: tc.j, Boundary: core.NewBoundary(nil), CardKey: cardKey, CheckpointEvery: -1, Verifier: signer.Verifier(),
						Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
						Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
					})
					if err != nil {
						b.Fatal(err)
					}
					if err := engine.LoadChannel(ctx, e, sc.Key()); err != nil {
						b.Fatal(err)
					}
					_ = e.Close()
				}
			})
		}
	}
}

// checkpointedJournal writes n commands into a fresh SQLite journal, with a
// checkpoint (the fold's snapshot, as the owner appends it) 100 before the end.
func checkpointedJournal(b *testing.B, n int) (*sqlite.Store, *core.Signer, core.Scope) {
	b.Helper()
	ctx := b.Context()
	signer := coretest.NewSigner(b)
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "j.db"), signer)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	bd := core.NewBoundary(func() time.Time { return at })
	sc := chanScope("BENCH")
	f := fold.NewChannel(sc.Key())
	var batch []core.Draft
	flush := func() {
		cmds, err := st.Append(ctx, batch...)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cmds {
			if err := f.Apply(c); err != nil {
				b.Fatal(err)
			}
		}
		batch = batch[:0]
	}
	add := func(d core.Draft, err error) {
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, d)
		if len(batch) == 512 {
			flush()
		}
	}
	written, checkpointed := 0, false
	for turn := 0; written < n; turn++ {
		if !checkpointed && written >= n-100 {
			flush()
			snap, err := f.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%d commands: snapshot of %d bytes at seq %d (%d runs)", n, len(snap), f.Seq(), f.Seq()/7)
			add(bd.System("checkpoint", sc, core.Meta{}, &core.FoldCheckpoint{Format: fold.SnapshotFormat, Seq: f.Seq(), Snapshot: snap}))
			flush()
			checkpointed = true
			written++
			continue
		}
		run, msg := fmt.Sprintf("R%d", turn), fmt.Sprintf("M%d", turn)
		thread := sc
		thread.Thread = msg
		add(bd.Human(alice, sc, core.Meta{Run: run}, &core.MessageReceived{MessageID: msg, Author: alice, Visibility: core.Public, Text: fmt.Sprintf("question %d about the deploy", turn)}))
		add(bd.Agent(run, thread, core.Meta{}, &core.RunStarted{Trigger: msg}))
		for i := range 3 {
			add(bd.Agent(run, thread, core.Meta{}, &core.ModelStep{Index: i, Text: "thinking", Usage: core.Usage{InputTokens: 100, OutputTokens: 20}}))
		}
		add(bd.Agent(run, thread, core.Meta{}, &core.MessagePosted{EffectID: "e" + run, MessageID: "B" + run, Role: core.RoleAnswer, Text: fmt.Sprintf("answer %d", turn)}))
		add(bd.Agent(run, thread, core.Meta{}, &core.RunCompleted{}))
		written += 7
		at = at.Add(time.Second)
	}
	flush()
	return st, signer, sc
}
