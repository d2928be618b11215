package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
)

// checkSnapshots checkpoints the fold of journal at random points: folding
// the first n commands, snapshotting, restoring and folding the rest must
// dump exactly as folding everything (want).
func checkSnapshots(t *testing.T, what string, r *rand.Rand, ch core.ChannelKey, journal []core.Command, want engine.FoldDump) {
	t.Helper()
	bySeq := map[uint64]core.Command{}
	for _, c := range journal {
		bySeq[c.Seq()] = c
	}
	points := []int{0, len(journal)}
	for range 3 {
		points = append(points, r.IntN(len(journal)+1))
	}
	for _, n := range points {
		f := fold.NewChannel(ch)
		for _, c := range journal[:n] {
			if err := f.Apply(c); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := fold.SnapshotSteer(snap)
		if err != nil {
			t.Fatal(err)
		}
		steer := map[uint64]core.Command{}
		for _, s := range seqs {
			steer[s] = bySeq[s]
		}
		g, err := fold.RestoreChannel(ch, snap, steer)
		if err != nil {
			t.Fatalf("%s: restore at %d: %v", what, n, err)
		}
		for _, c := range journal[n:] {
			if err := g.Apply(c); err != nil {
				t.Fatal(err)
			}
		}
		st, internal, err := g.Dump()
		if err != nil {
			t.Fatal(err)
		}
		sameFold(t, fmt.Sprintf("%s: checkpoint after %d of %d commands", what, n, len(journal)), engine.FoldDump{State: st, Engine: internal}, want)
	}
}
