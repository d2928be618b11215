package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// What an erasure of thousands of commands needs of a journal, past Redact:
// a person's messages found from an index (AuthorIndex), and redactions
// written many to a durable write (BatchRedactor). store/sqlite,
// store/postgres and coretest.MemJournal implement both, and
// core/journaltest holds them to it; RedactAll and MessagesBy fall back to
// the plain Journal for any other journal (a wrapper, say), slower.

// Redaction is one target of a batched redaction: the seq whose payload is
// destroyed and the signed command.redacted naming it (as Redact takes
// them).
type Redaction struct {
	Seq    uint64
	Record Draft
}

// BatchRedactor redacts many commands of one channel in one transaction.
type BatchRedactor interface {
	// RedactBatch does what Redact does for each of reds, in one
	// transaction: each target's payload destroyed and its record
	// appended, in the order of reds. A target already redacted (an
	// erasure run again, or retention got there first) is skipped and its
	// record not appended: its own signed record is in the journal
	// already. Any other refusal (CheckRedactions, CheckRedaction, a
	// missing target) writes nothing. It returns the records appended.
	RedactBatch(ctx context.Context, reds []Redaction) ([]Command, error)
}

// AuthorIndex finds a person's messages without reading every channel.
type AuthorIndex interface {
	// MessagesBy returns every message.received, not redacted, whose
	// signed actor is the human person of platform, in (channel, seq)
	// order. The actor is what the boundary stamped from the platform's
	// verified user id (ingress drafts a message in its author's name), so
	// this is the person's own messages and no one else's.
	MessagesBy(ctx context.Context, platform, person string) ([]Command, error)
}

// CheckRedactions validates a batch of redactions before a store opens a
// transaction: at least one, every record of one channel, no seq twice.
func CheckRedactions(reds []Redaction) (ChannelKey, error) {
	if len(reds) == 0 {
		return "", errors.New("redact: empty batch")
	}
	drafts := make([]Draft, len(reds))
	seen := make(map[uint64]bool, len(reds))
	for i, r := range reds {
		if seen[r.Seq] {
			return "", fmt.Errorf("redact: seq %d twice in one batch", r.Seq)
		}
		seen[r.Seq] = true
		drafts[i] = r.Record
	}
	ch, err := CheckBatch(drafts)
	if err != nil {
		return "", fmt.Errorf("redact: %w", err)
	}
	return ch, nil
}

// RedactAll redacts reds (one channel) through j: in one write when j is a
// BatchRedactor, one Redact at a time otherwise. Targets already redacted
// are skipped either way. It returns the records appended.
func RedactAll(ctx context.Context, j Journal, reds []Redaction) ([]Command, error) {
	if len(reds) == 0 {
		return nil, nil
	}
	if b, ok := j.(BatchRedactor); ok {
		return b.RedactBatch(ctx, reds)
	}
	if _, err := CheckRedactions(reds); err != nil {
		return nil, err
	}
	var out []Command
	for _, r := range reds {
		c, err := j.Redact(ctx, r.Seq, r.Record)
		if err != nil {
			cur, rerr := j.Read(ctx, r.Record.Channel(), r.Seq, 1)
			if rerr == nil && len(cur) == 1 && cur[0].Seq() == r.Seq && cur[0].Redacted() {
				continue
			}
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// MessagesBy returns person's messages as AuthorIndex does: from j's index
// when it has one, else by reading every channel of platform.
func MessagesBy(ctx context.Context, j Journal, platform, person string) ([]Command, error) {
	if ix, ok := j.(AuthorIndex); ok {
		return ix.MessagesBy(ctx, platform, person)
	}
	chs, err := j.Channels(ctx)
	if err != nil {
		return nil, err
	}
	var out []Command
	for _, ch := range chs {
		if !strings.HasPrefix(string(ch), platform+"/") {
			continue
		}
		cmds, err := j.Read(ctx, ch, 1, 0)
		if err != nil {
			return nil, err
		}
		for _, c := range cmds {
			if IsMessageBy(c, platform, person) {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// IsMessageBy reports whether c is a message.received, not redacted, whose
// actor is the human person of platform: what AuthorIndex selects.
func IsMessageBy(c Command, platform, person string) bool {
	a := c.Actor()
	return c.Kind() == KindMessageReceived && !c.Redacted() &&
		a.Type == ActorHuman && a.ID == person && a.Platform == platform
}
