package coretest

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

var (
	_ core.BatchRedactor = (*MemJournal)(nil)
	_ core.AuthorIndex   = (*MemJournal)(nil)
)

// RedactBatch implements core.BatchRedactor: every target checked, then
// destroyed and every record appended, in one critical section.
func (j *MemJournal) RedactBatch(ctx context.Context, reds []core.Redaction) ([]core.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch, err := core.CheckRedactions(reds)
	if err != nil {
		return nil, err
	}
	if j.signer == nil {
		return nil, core.ErrReadOnly
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	var idx []int
	var records []core.Draft
	for _, r := range reds {
		i, ok := j.st.find(ch, r.Seq)
		if !ok {
			return nil, fmt.Errorf("redact seq %d of %s: %w", r.Seq, ch, core.ErrNotFound)
		}
		if j.st.rows[ch][i].Redacted {
			continue // redacted already, with its own record
		}
		target, err := core.FromRecord(j.st.rows[ch][i])
		if err != nil {
			return nil, err
		}
		if err := core.CheckRedaction(target, r.Record); err != nil {
			return nil, fmt.Errorf("redact seq %d of %s: %w", r.Seq, ch, err)
		}
		idx, records = append(idx, i), append(records, r.Record)
	}
	if len(records) == 0 {
		return nil, nil
	}
	out, err := j.appendLocked(records)
	if err != nil {
		return nil, err
	}
	for _, i := range idx {
		j.st.rows[ch][i].Payload, j.st.rows[ch][i].Redacted = nil, true
	}
	return out, nil
}

// MessagesBy implements core.AuthorIndex by a scan: the memory journal's
// rows are in memory already.
func (j *MemJournal) MessagesBy(ctx context.Context, platform, person string) ([]core.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	chs, err := j.Channels(ctx)
	if err != nil {
		return nil, err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	var out []core.Command
	for _, ch := range chs {
		for _, r := range j.st.rows[ch] {
			if r.Kind != core.KindMessageReceived.String() || r.Redacted {
				continue
			}
			c, err := core.FromRecord(r)
			if err != nil {
				return nil, err
			}
			if core.IsMessageBy(c, platform, person) {
				out = append(out, c)
			}
		}
	}
	return out, nil
}
