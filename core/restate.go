package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// Restatement: how a decision record loses the free text of an erasure
// (docs/privacy.md). Decision records (approvals, gate decisions, run ends,
// reports) cannot simply be redacted: the folds need them to know who
// decided what. Instead the record's payload is destroyed and replaced, in
// the same place of the chain, by a restatement: the same payload with
// every string that carries an erased text replaced by ErasedText. The
// signed command.redacted naming the target names the restatement's hash
// (CommandRedacted.Restated), so the chain verifies and a later edit of the
// restatement does not.

// ErasedText replaces a string that carried an erased text.
const ErasedText = "[erased]"

// restatableKinds are the decision records an erasure restates rather than
// keeps: their ids and decisions stay, their free text goes. Routines,
// policy and memories are not restated (their text is what they do).
var restatableKinds = []Kind{
	KindApprovalRequested, KindApprovalResolved, KindPermissionDecided,
	KindRunPaused, KindRunCompleted, KindRunFailed, KindRoutineFired, KindReportFiled,
}

// RestatableKinds lists the kinds an erasure restates (a copy).
func RestatableKinds() []Kind { return slices.Clone(restatableKinds) }

// Restatable reports whether an erasure restates a command of kind k.
func Restatable(k Kind) bool { return slices.Contains(restatableKinds, k) }

// Restater is the optional journal capability of restating a command
// (store/sqlite, store/postgres, coretest.MemJournal).
type Restater interface {
	// Restate destroys the payload of the command at seq like Redact, keeps
	// payload in its place, and appends record (a command.redacted naming
	// seq and payload's hash) in the same transaction.
	Restate(ctx context.Context, seq uint64, payload []byte, record Draft) (Command, error)
}

// Restate returns c's payload with every string value carrying one of texts
// (or a piece of one, as TextMatcher finds them, JSON inside strings
// included) replaced by ErasedText, and whether anything was replaced.
func Restate(c Command, texts []string) ([]byte, bool, error) {
	return RestateMatching(c, NewTextMatcher(texts...))
}

// RestateMatching is Restate with the texts indexed already.
func RestateMatching(c Command, m *TextMatcher) ([]byte, bool, error) {
	if c.Redacted() || len(c.payload) == 0 || m.Empty() {
		return nil, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(c.payload))
	dec.UseNumber() // ids and counts round-trip exactly
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("restate %s: %w", c, err)
	}
	changed := false
	v = scrub(v, m, &changed)
	if !changed {
		return nil, false, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Errorf("restate %s: %w", c, err)
	}
	return b, true, nil
}

func scrub(v any, m *TextMatcher, changed *bool) any {
	switch x := v.(type) {
	case string:
		if m.value(x, 0) {
			*changed = true
			return ErasedText
		}
	case map[string]any:
		for k, e := range x {
			x[k] = scrub(e, m, changed)
		}
	case []any:
		for i, e := range x {
			x[i] = scrub(e, m, changed)
		}
	}
	return v
}

// restatementHash is the hex sha256 a command.redacted names a restatement by.
func restatementHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// RestatementHash is what CommandRedacted.Restated holds for payload.
func RestatementHash(payload []byte) string { return restatementHash(payload) }

// CheckRestatement validates a restatement of target: a restatable kind, a
// payload of the target's kind, and a record naming its hash.
func CheckRestatement(target Command, payload []byte, record Draft) error {
	if err := CheckRedaction(target, record); err != nil {
		return err
	}
	if !Restatable(target.Kind()) {
		return fmt.Errorf("restate: seq %d is a %s, which is not restated", target.Seq(), target.Kind())
	}
	p, err := Decode[*CommandRedacted](Command{kind: record.c.kind, v: record.c.v, payload: record.c.payload})
	if err != nil {
		return fmt.Errorf("restate: %w", err)
	}
	if p.Restated != restatementHash(payload) {
		return fmt.Errorf("restate: record names restatement %q, payload hashes to %s", p.Restated, restatementHash(payload))
	}
	probe := target
	probe.redacted, probe.restated, probe.payload = true, true, payload
	if _, err := probe.Payload(); err != nil {
		return fmt.Errorf("restate: payload is not a %s: %w", target.Kind(), err)
	}
	return nil
}

// WithRestatement is the redacted c with payload standing in its place: what
// a store returns for a row it keeps a restatement of. Trust comes from
// verification (the signed record names the restatement's hash).
func (c Command) WithRestatement(payload []byte) Command {
	if !c.redacted || payload == nil {
		return c
	}
	c.payload, c.restated = slices.Clone(payload), true
	return c
}

// RestateIn restates c without m's texts through j, when c's kind is
// restatable, it carries one of them, and j is a Restater; record builds
// the command.redacted naming the restatement's hash. It reports whether c
// was restated (false: kept as it is).
func RestateIn(ctx context.Context, j Journal, c Command, m *TextMatcher, record func(restated string) (Draft, error)) (bool, error) {
	rs, ok := j.(Restater)
	if !ok || !Restatable(c.Kind()) {
		return false, nil
	}
	payload, changed, err := RestateMatching(c, m)
	if err != nil || !changed {
		return false, err
	}
	rd, err := record(RestatementHash(payload))
	if err != nil {
		return false, err
	}
	if _, err := rs.Restate(ctx, c.Seq(), payload, rd); err != nil {
		return false, fmt.Errorf("restate %s: %w", c, err)
	}
	return true, nil
}
