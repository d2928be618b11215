package journaltest

import (
	"encoding/json"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// testLatestOfKind: the checkpointed load's read. The latest unredacted
// command of a kind in one channel, never another channel's, never a
// redacted one; none when there is none.
func testLatestOfKind(t *testing.T, f *fixture) {
	ctx := t.Context()
	lr, ok := f.j.(core.LatestReader)
	if !ok {
		t.Skip("journal does not implement core.LatestReader (a store must: store/sqlite and store/postgres assert it)")
	}
	ch := key("ckpt")
	checkpoint := func(chName string, seq uint64, text string) core.Draft {
		snap, _ := json.Marshal(map[string]string{"text": text})
		d, err := f.bd.System("engine", scope(chName), core.Meta{}, &core.FoldCheckpoint{Format: 1, Seq: seq, Snapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if _, ok, err := lr.LatestOfKind(ctx, ch, core.KindFoldCheckpoint); err != nil || ok {
		t.Fatalf("empty channel: found=%v err=%v", ok, err)
	}
	f.fill("ckpt", 3)
	first := f.append(checkpoint("ckpt", 3, "first"))[0]
	f.fill("ckpt", 2)
	second := f.append(checkpoint("ckpt", 6, "second"))[0]
	f.fill("ckpt", 2)
	f.append(checkpoint("other", 0, "elsewhere")) // another channel's, later

	got, ok, err := lr.LatestOfKind(ctx, ch, core.KindFoldCheckpoint)
	if err != nil || !ok {
		t.Fatalf("latest checkpoint: found=%v err=%v", ok, err)
	}
	sameCommand(t, got, second)
	if err := f.v.Verify(got); err != nil {
		t.Fatalf("the command read back does not verify: %v", err)
	}
	p, err := core.Decode[*core.FoldCheckpoint](got)
	if err != nil || p.Seq != 6 || p.Format != 1 {
		t.Fatalf("payload read back: %+v %v", p, err)
	}

	// A redacted checkpoint is passed over: the one before it is latest.
	rec, err := f.bd.System("operator", scope("ckpt"), core.Meta{Cause: second.ID()},
		&core.CommandRedacted{Seq: second.Seq(), ID: second.ID(), Reason: "erasure", TargetKind: second.Kind().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.j.Redact(ctx, second.Seq(), rec); err != nil {
		t.Fatal(err)
	}
	got, ok, err = lr.LatestOfKind(ctx, ch, core.KindFoldCheckpoint)
	if err != nil || !ok {
		t.Fatalf("latest after redaction: found=%v err=%v", ok, err)
	}
	sameCommand(t, got, first)

	// Other kinds answer too (the read is not checkpoint-only).
	msg, ok, err := lr.LatestOfKind(ctx, ch, core.KindMessageReceived)
	if err != nil || !ok || msg.Kind() != core.KindMessageReceived || msg.Seq() != 9 {
		t.Fatalf("latest message: %v found=%v err=%v", msg, ok, err)
	}
}
