package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// Checkpoints (docs/architecture.md, "Checkpoints"). A fold.checkpoint
// command is a snapshot of a channel's fold at a seq, appended to the
// channel's own chain like any command: signed, hash-chained, verified by
// `bot verify`. Loading a channel restores its latest one and folds only
// the commands after it, so the cost of touching a channel again (after a
// restart, an eviction, a takeover) does not grow with its length.

// DefaultCheckpointEvery is how many commands a channel grows by between
// checkpoints: a load folds at most about this many commands after one.
const DefaultCheckpointEvery = 1000

// checkpointBytesPerCommand spaces checkpoints by their size too: the fold
// (and so its snapshot) grows with the channel, and each checkpoint is a
// full copy in the journal. A channel waits at least one command per this
// many bytes of its latest snapshot, so checkpoints add about one
// snapshot per that many commands' worth of journal (a 4.8 MB snapshot:
// one checkpoint per ~9,400 commands rather than per 1,000).
const checkpointBytesPerCommand = 512

// checkpointConfig is the engine's, shared by its views; never changed.
type checkpointConfig struct {
	every  int            // <= 0: take none
	verify *core.Verifier // nil: restore none, take none
	// owned: no lease table, this engine drives every channel. Otherwise a
	// checkpoint is taken only by an append under the channel's fence.
	owned bool
	b     *core.Boundary
	log   *slog.Logger
}

// verifierOf is what a journal offers to check its own commands
// (store/sqlite and store/postgres: their signer's public key).
type verifierOf interface{ Verifier() *core.Verifier }

func newCheckpointConfig(cfg Config, log *slog.Logger) *checkpointConfig {
	c := &checkpointConfig{every: cfg.CheckpointEvery, verify: cfg.Verifier, owned: cfg.Leases == nil, b: cfg.Boundary, log: log}
	if c.every == 0 {
		c.every = DefaultCheckpointEvery
	}
	if c.verify == nil {
		if j, ok := cfg.Journal.(verifierOf); ok {
			c.verify = j.Verifier()
		}
	}
	if c.verify == nil && c.every > 0 {
		// Not silently: a journal wrapper hides the store's verifier, and
		// every load then folds whole.
		log.Warn("checkpoints off: no verifier (set engine.Config.Verifier); every channel load folds its whole journal")
	}
	return c
}

// viewCheckpoint is one view's checkpoint state, renewed by reset.
type viewCheckpoint struct {
	cfg *checkpointConfig // nil in views made outside an engine (tests)
	// at is the seq of the latest checkpoint command folded (0: none).
	at uint64
	// restored is the seq the restored snapshot covers (0: folded from 1).
	restored uint64
	// size is the latest checkpoint's payload size in bytes (0: none).
	size int
}

// note is called for every command the view folds (under its lock). A
// command.redacted needs nothing here: the fold drops what it copied from
// the redacted command, so a fold that folded redactions still makes a
// checkpoint without the erased text.
func (ck *viewCheckpoint) note(c core.Command) {
	if !c.Redacted() && c.Kind() == core.KindFoldCheckpoint {
		ck.at, ck.size = c.Seq(), len(c.RawPayload())
	}
}

// restore sets the fold from the channel's latest checkpoint, when the
// journal offers the read and the checkpoint verifies and decodes; else it
// leaves the fold empty (a full fold follows). Callers hold v.mu.
func (v *chanView) restore(ctx context.Context) {
	cfg := v.ck.cfg
	lr, ok := v.j.(core.LatestReader)
	if cfg == nil || cfg.verify == nil || !ok {
		return
	}
	c, found, err := lr.LatestOfKind(ctx, v.key, core.KindFoldCheckpoint)
	if err != nil {
		cfg.log.WarnContext(ctx, "read checkpoint: folding the channel whole", "channel", v.key, "err", err)
		return
	}
	if !found {
		return
	}
	f, err := v.decodeCheckpoint(ctx, c)
	if err != nil {
		cfg.log.WarnContext(ctx, "checkpoint unusable: folding the channel whole", "channel", v.key, "seq", c.Seq(), "err", err)
		return
	}
	v.fold, v.seq = f, f.Seq()
	v.ck.restored = f.Seq() // the checkpoint itself is folded next (note sets at and size)
}

// errCheckpoint marks a checkpoint that cannot be restored.
var errCheckpoint = errors.New("checkpoint")

// decodeCheckpoint checks c (its signature and payload hash, that it is of
// this channel and sits right after the seq it covers, with the snapshot's
// head as its signed prev: so it is the chain's own state at that seq) and
// restores the snapshot.
func (v *chanView) decodeCheckpoint(ctx context.Context, c core.Command) (fold.Channel, error) {
	fail := func(format string, args ...any) (fold.Channel, error) {
		return fold.Channel{}, errors.Join(errCheckpoint, fmt.Errorf(format, args...))
	}
	if err := v.ck.cfg.verify.Verify(c); err != nil {
		return fail("signature: %v", err)
	}
	if c.Channel() != v.key {
		return fail("of channel %s", c.Channel())
	}
	p, err := core.Decode[*core.FoldCheckpoint](c)
	if err != nil {
		return fail("decode: %v", err)
	}
	if p.Format != fold.SnapshotFormat {
		return fail("snapshot format %d, this build reads %d", p.Format, fold.SnapshotFormat)
	}
	if p.Seq+1 != c.Seq() {
		return fail("covers seq %d but sits at seq %d", p.Seq, c.Seq())
	}
	seqs, err := fold.SnapshotSteer(p.Snapshot)
	if err != nil {
		return fail("%v", err)
	}
	steer := make(map[uint64]core.Command, len(seqs))
	for _, seq := range seqs {
		cmds, err := v.j.Read(ctx, v.key, seq, 1)
		if err != nil {
			return fail("read steering command %d: %v", seq, err)
		}
		if len(cmds) == 1 {
			steer[seq] = cmds[0]
		}
	}
	f, err := fold.RestoreChannel(v.key, p.Snapshot, steer)
	if err != nil {
		return fail("%v", err)
	}
	if f.Seq() != p.Seq || f.Head() != c.Prev() {
		return fail("snapshot is of seq %d, not the chain's seq %d", f.Seq(), p.Seq)
	}
	return f, nil
}

// maybeCheckpoint appends a checkpoint when the channel has grown by
// cfg.every commands since its last one. Only the channel's driver takes
// one: under its fence, or with no lease table at all. A failure is logged
// and changes nothing (the next append tries again). Callers hold v.mu.
func (v *chanView) maybeCheckpoint(ctx context.Context, fence *core.Fence) {
	cfg := v.ck.cfg
	if cfg == nil || cfg.every <= 0 || cfg.verify == nil || v.seq < v.ck.at+v.ck.interval() {
		return
	}
	if fence == nil && !cfg.owned {
		return
	}
	if _, ok := v.j.(core.LatestReader); !ok {
		return // nothing would ever restore it
	}
	snap, err := v.fold.Snapshot()
	if err != nil {
		cfg.log.WarnContext(ctx, "checkpoint: snapshot", "channel", v.key, "err", err)
		return
	}
	sc, err := core.ParseChannelKey(string(v.key))
	if err != nil {
		cfg.log.WarnContext(ctx, "checkpoint: channel key", "channel", v.key, "err", err)
		return
	}
	d, err := cfg.b.System("checkpoint", sc, core.Meta{}, &core.FoldCheckpoint{Format: fold.SnapshotFormat, Seq: v.seq, Snapshot: snap})
	if err != nil {
		cfg.log.WarnContext(ctx, "checkpoint: draft", "channel", v.key, "err", err)
		return
	}
	cmds, err := v.j.AppendAt(ctx, core.Expect{Head: v.seq, Fence: fence}, d)
	if err != nil {
		// Another writer moved the head or took the lease: its own view
		// decides; this one tries again after its next append.
		cfg.log.DebugContext(ctx, "checkpoint: append", "channel", v.key, "err", err, "lease_lost", errors.Is(err, core.ErrFenced))
		return
	}
	for _, c := range cmds {
		if err := v.apply(c); err != nil {
			cfg.log.WarnContext(ctx, "checkpoint: fold", "channel", v.key, "err", err)
		}
	}
}

// interval is how many commands the channel grows by before its next
// checkpoint: cfg.every, or more when the latest snapshot is large.
func (ck *viewCheckpoint) interval() uint64 {
	return uint64(max(ck.cfg.every, ck.size/checkpointBytesPerCommand))
}
