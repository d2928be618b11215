package core

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Journal is the append-only, signed, per-channel hash-chained log of
// Commands. Implementations: store/postgres, store/sqlite. Every
// implementation passes the suite in core/journaltest.
type Journal interface {
	// Append seals and appends drafts atomically: all or none. All drafts
	// must share one channel. It assigns consecutive seqs after the channel's
	// head and chains prev; concurrent appenders (goroutines or processes)
	// never fork the chain or duplicate a seq.
	Append(ctx context.Context, drafts ...Draft) ([]Command, error)
	// AppendAt appends like Append, but only when the channel's head is
	// still exp.Head and, when exp.Fence is set, the fence's lease has not
	// passed to another holder since. Otherwise it appends nothing and
	// returns an error wrapping ErrHeadMoved or ErrFenced. This is what makes
	// a decision taken on a folded view (is this approval still pending? is
	// the run still live?) hold across replicas: a replica with a stale view
	// or a lost lease cannot write.
	AppendAt(ctx context.Context, exp Expect, drafts ...Draft) ([]Command, error)
	// Read returns up to limit commands of a channel with seq >= from, in seq
	// order (limit <= 0: all).
	Read(ctx context.Context, ch ChannelKey, from uint64, limit int) ([]Command, error)
	// ReadRun returns a run's commands in (channel, seq) order.
	ReadRun(ctx context.Context, run string) ([]Command, error)
	// Channels lists every channel with at least one command.
	Channels(ctx context.Context) ([]ChannelKey, error)
	// Head returns the channel's last seq and its hash as recorded at append
	// (0 and the zero hash for an empty channel). Verify compares the chain's
	// end with it, so a deleted last row is detected too.
	Head(ctx context.Context, ch ChannelKey) (uint64, Hash, error)
	// Redact destroys the payload of the command at seq in the draft's
	// channel and appends the draft (a command.redacted naming that seq) in
	// the same transaction. The payload hash stays, so the chain verifies.
	Redact(ctx context.Context, seq uint64, record Draft) (Command, error)

	// Tail reads: what start-up needs, without reading every channel. Each
	// is answered from indexes (migration 00004), skips redacted commands
	// (as the folds do) and returns commands in (channel, seq) order.

	// Unfinished returns the commands that may leave work unfinished:
	//   - the run.started of every run with no run.completed or run.failed;
	//   - the run.failed of every run that owes an end notice (broken, or
	//     cancelled other than by being superseded) with no message.posted
	//     of key EffectID(channel, seq of the run.failed, 0) after it. A
	//     store may return more failed runs, each with the message.posted
	//     commands of its run that follow it: Engine.Start applies the rule
	//     itself;
	//   - the approval.requested of every run with more approval.requested
	//     than approval.resolved (a pending approval).
	Unfinished(ctx context.Context) ([]Command, error)
	// Policies returns every policy.changed command.
	Policies(ctx context.Context) ([]Command, error)
	// PostsSince returns every message.posted at or after since, with what
	// rebuilding intent windows from them needs: the policy.changed
	// commands of their channels and the message.received commands of
	// their runs (the messages they answer).
	PostsSince(ctx context.Context, since time.Time) ([]Command, error)
	// ItemChannels returns, in order, the channels of platform holding an
	// approval.requested, consent.granted or report.filed: the only
	// channels where a person's inbox, App Home or `consents` can find
	// anything, so those read these channels and not every channel.
	ItemChannels(ctx context.Context, platform string) ([]ChannelKey, error)
}

// Expect is what an AppendAt requires of the journal.
type Expect struct {
	// Head is the seq of the channel's last command the caller has folded
	// (0: the channel is empty).
	Head uint64
	// Fence, when set, is the lease the writer drives the channel under.
	Fence *Fence
}

// Errors shared by journal implementations.
var (
	// ErrHeadMoved: the channel's head is past the expected one; the writer
	// catches up and decides again.
	ErrHeadMoved = errors.New("journal: channel head moved")
	// ErrFenced: the writer's lease has passed to another replica; it must
	// stop driving the channel.
	ErrFenced        = errors.New("journal: lease fence is stale (another replica owns the channel)")
	ErrMixedChannels = errors.New("journal: batch spans more than one channel")
	ErrNotFound      = errors.New("not found")
	// ErrReadOnly: the journal was opened without a signing key (to verify
	// or replay) and cannot append.
	ErrReadOnly = errors.New("journal: opened read-only (no signing key)")
)

// CheckBatch validates a batch before a store opens a transaction.
func CheckBatch(drafts []Draft) (ChannelKey, error) {
	if len(drafts) == 0 {
		return "", errors.New("journal: empty batch")
	}
	ch := drafts[0].Channel()
	for _, d := range drafts {
		if d.IsZero() {
			return "", errors.New("journal: zero draft (drafts come from core.Boundary)")
		}
		if d.Channel() != ch {
			return "", ErrMixedChannels
		}
	}
	return ch, nil
}

// CheckRedaction validates a redaction request against the command it targets.
func CheckRedaction(target Command, record Draft) error {
	if record.Kind() != KindCommandRedacted {
		return fmt.Errorf("redact: record is %s, want %s", record.Kind(), KindCommandRedacted)
	}
	p, err := Decode[*CommandRedacted](Command{kind: record.c.kind, v: record.c.v, payload: record.c.payload})
	if err != nil {
		return fmt.Errorf("redact: %w", err)
	}
	if p.Seq != target.Seq() || p.ID != target.ID() {
		return fmt.Errorf("redact: record names %d/%s, target is %d/%s", p.Seq, p.ID, target.Seq(), target.ID())
	}
	if target.Channel() != record.Channel() {
		return ErrMixedChannels
	}
	// A redaction record is what makes its target's missing payload valid;
	// destroying it would leave that target unaccounted for.
	if target.Kind() == KindCommandRedacted {
		return fmt.Errorf("redact: seq %d is itself a %s record", target.Seq(), KindCommandRedacted)
	}
	return nil
}

// ChainError names the first bad command of a channel.
type ChainError struct {
	Channel ChannelKey
	Seq     uint64
	Reason  string
	Err     error // the cause, when there is one (an *UntrustedKeyError, say)
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("channel %s: seq %d: %s", e.Channel, e.Seq, e.Reason)
}

func (e *ChainError) Unwrap() error { return e.Err }

// ChainVerifier checks one channel's commands in order, one at a time, so a
// long channel can be verified in pages. Call Finish after the last one.
type ChainVerifier struct {
	v       *Verifier
	ch      ChannelKey
	nextSeq uint64
	prev    Hash
	// unredeemed holds the redacted rows seen so far (seq -> id) that no
	// later command.redacted has named yet. The redacted flag is not signed:
	// only such a signed record makes a missing payload valid.
	unredeemed map[uint64]string
	// restated holds, for the unredeemed rows that carry a restatement, the
	// hash of its bytes: the redeeming record must name that hash (signed).
	restated map[uint64]string
}

// NewChainVerifier starts verifying ch from its first command.
func NewChainVerifier(v *Verifier, ch ChannelKey) *ChainVerifier {
	return &ChainVerifier{v: v, ch: ch, nextSeq: 1, unredeemed: map[uint64]string{}, restated: map[uint64]string{}}
}

// Next checks c against the chain so far.
func (cv *ChainVerifier) Next(c Command) error { return cv.next(c, cv.v.Verify(c)) }

func (cv *ChainVerifier) next(c Command, sigErr error) error {
	fail := func(seq uint64, format string, args ...any) error {
		return &ChainError{Channel: cv.ch, Seq: seq, Reason: fmt.Sprintf(format, args...)}
	}
	if c.Channel() != cv.ch {
		return fail(c.Seq(), "belongs to channel %s", c.Channel())
	}
	if c.Seq() != cv.nextSeq {
		if c.Seq() > cv.nextSeq {
			return fail(cv.nextSeq, "missing (next stored seq is %d)", c.Seq())
		}
		return fail(c.Seq(), "out of order (expected seq %d)", cv.nextSeq)
	}
	if sigErr != nil {
		return &ChainError{Channel: cv.ch, Seq: c.Seq(), Reason: sigErr.Error(), Err: sigErr}
	}
	if c.Prev() != cv.prev {
		return fail(c.Seq(), "chain broken: prev does not match the hash of seq %d", c.Seq()-1)
	}
	switch {
	case c.Redacted():
		cv.unredeemed[c.Seq()] = c.ID()
		if c.Restated() {
			cv.restated[c.Seq()] = restatementHash(c.payload)
		}
	case c.Kind() == KindCommandRedacted:
		// The payload hash was checked with the signature, so these are the
		// signed seq and id.
		p, err := Decode[*CommandRedacted](c)
		if err != nil {
			return fail(c.Seq(), "unreadable %s record: %v", KindCommandRedacted, err)
		}
		if id, ok := cv.unredeemed[p.Seq]; ok && id == p.ID && cv.restated[p.Seq] == p.Restated {
			delete(cv.unredeemed, p.Seq)
			delete(cv.restated, p.Seq)
		}
	}
	cv.prev = c.Hash()
	cv.nextSeq++
	return nil
}

// Head returns the last verified seq and its hash.
func (cv *ChainVerifier) Head() (uint64, Hash) { return cv.nextSeq - 1, cv.prev }

// Finish reports the first redacted row that no later signed
// command.redacted in the channel names by seq and id: a payload destroyed
// behind the journal's back.
func (cv *ChainVerifier) Finish() error {
	if len(cv.unredeemed) == 0 {
		return nil
	}
	first := uint64(0)
	for seq := range cv.unredeemed {
		if first == 0 || seq < first {
			first = seq
		}
	}
	return &ChainError{Channel: cv.ch, Seq: first, Reason: fmt.Sprintf(
		"payload removed (marked redacted) without a later signed %s naming seq %d id %s", KindCommandRedacted, first, cv.unredeemed[first])}
}

// VerifyChannel reads and verifies one channel in pages, checking signatures
// on every core in parallel and the chain and redactions in order. It returns the number of
// commands verified and a *ChainError at the first bad one.
func VerifyChannel(ctx context.Context, j Journal, v *Verifier, ch ChannelKey) (int, error) {
	const page = 4096
	cv := NewChainVerifier(v, ch)
	n := 0
	for from := uint64(1); ; {
		cmds, err := j.Read(ctx, ch, from, page)
		if err != nil {
			return n, fmt.Errorf("verify %s: read from %d: %w", ch, from, err)
		}
		sigErrs := v.verifyParallel(cmds)
		for i, c := range cmds {
			if err := cv.next(c, sigErrs[i]); err != nil {
				return n, err
			}
			n++
		}
		if len(cmds) < page {
			break
		}
		from = cmds[len(cmds)-1].Seq() + 1
	}
	if err := cv.Finish(); err != nil {
		return n, err
	}
	headSeq, headHash, err := j.Head(ctx, ch)
	if err != nil {
		return n, fmt.Errorf("verify %s: read head: %w", ch, err)
	}
	if seq, h := cv.Head(); seq != headSeq || h != headHash {
		if headSeq > seq {
			return n, &ChainError{Channel: ch, Seq: seq + 1, Reason: fmt.Sprintf("missing (journal head is seq %d)", headSeq)}
		}
		return n, &ChainError{Channel: ch, Seq: headSeq, Reason: fmt.Sprintf("journal head (seq %d) does not match the chain's end (seq %d)", headSeq, seq)}
	}
	return n, nil
}

// verifyParallel checks each command's signature and payload hash, spread
// over every core: signature checks dominate verification cost.
func (v *Verifier) verifyParallel(cmds []Command) []error {
	errs := make([]error, len(cmds))
	workers := runtime.GOMAXPROCS(0)
	if len(cmds) < 64 || workers < 2 {
		for i, c := range cmds {
			errs[i] = v.Verify(c)
		}
		return errs
	}
	var wg sync.WaitGroup
	chunk := (len(cmds) + workers - 1) / workers
	for start := 0; start < len(cmds); start += chunk {
		end := min(start+chunk, len(cmds))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := start; i < end; i++ {
				errs[i] = v.Verify(cmds[i])
			}
		}()
	}
	wg.Wait()
	return errs
}

// VerifyAll verifies every channel and returns the first failure.
func VerifyAll(ctx context.Context, j Journal, v *Verifier) (int, error) {
	chs, err := j.Channels(ctx)
	if err != nil {
		return 0, fmt.Errorf("verify: list channels: %w", err)
	}
	total := 0
	for _, ch := range chs {
		n, err := VerifyChannel(ctx, j, v, ch)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// LatestReader is the read a checkpointed load needs (store/postgres and
// store/sqlite implement it, from an index; core/journaltest holds them to
// the same behaviour). A journal without it is loaded by folding it whole.
type LatestReader interface {
	// LatestOfKind returns ch's command of kind with the highest seq that is
	// not redacted; false when there is none.
	LatestOfKind(ctx context.Context, ch ChannelKey, kind Kind) (Command, bool, error)
}
