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

// RestatableKinds are the decision records an erasure restates rather than
// keeps: their ids and decisions stay, their free text goes. Routines,
// policy and memories are not restated (their text is what they do).
var RestatableKinds = []Kind{
	KindApprovalRequested, KindApprovalResolved, KindPermissionDecided,
	KindRunPaused, KindRunCompleted, KindRunFailed, KindRoutineFired, KindReportFiled,
}

// Restatable reports whether an erasure restates a command of kind k.
func Restatable(k Kind) bool { return slices.Contains(RestatableKinds, k) }

// Restater is the optional journal capability of restating a command
// (store/sqlite, store/postgres, coretest.MemJournal).
type Restater interface {
	// Restate destroys the payload of the command at seq like Redact, keeps
	// payload in its place, and appends record (a command.redacted naming
	// seq and payload's hash) in the same transaction.
	Restate(ctx context.Context, seq uint64, payload []byte, record Draft) (Command, error)
}

// Restate returns c's payload with every string value carrying one of texts
// (as CarriesText finds them, JSON inside strings included) replaced by
// ErasedText, and whether anything was replaced.
func Restate(c Command, texts []string) ([]byte, bool, error) {
	if c.Redacted() || len(c.payload) == 0 {
		return nil, false, nil
	}
	var wants []string
	for _, t := range texts {
		if w := normText(t); w != "" {
			wants = append(wants, w)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(c.payload))
	dec.UseNumber() // ids and counts round-trip exactly
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("restate %s: %w", c, err)
	}
	changed := false
	v = scrub(v, wants, &changed)
	if !changed {
		return nil, false, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Errorf("restate %s: %w", c, err)
	}
	return b, true, nil
}

func scrub(v any, wants []string, changed *bool) any {
	switch x := v.(type) {
	case string:
		for _, w := range wants {
			if valueCarries(x, w, 0) {
				*changed = true
				return ErasedText
			}
		}
	case map[string]any:
		for k, e := range x {
			x[k] = scrub(e, wants, changed)
		}
	case []any:
		for i, e := range x {
			x[i] = scrub(e, wants, changed)
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

// RestateIn restates c without texts through j, when c's kind is
// restatable, it carries one of texts, and j is a Restater; record builds
// the command.redacted naming the restatement's hash. It reports whether c
// was restated (false: kept as it is).
func RestateIn(ctx context.Context, j Journal, c Command, texts []string, record func(restated string) (Draft, error)) (bool, error) {
	rs, ok := j.(Restater)
	if !ok || !Restatable(c.Kind()) {
		return false, nil
	}
	payload, changed, err := Restate(c, texts)
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
