package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// Errors of Remember and Correct.
var (
	ErrEmpty   = errors.New("memory: nothing to remember (text is empty)")
	ErrTooLong = errors.New("memory: text is too long")
)

// journalTail is how many of a channel's last commands Remember searches
// for an earlier memory.written of the same origin when the writer is not a
// run (a run's commands are searched whole). A crash between journaling and
// indexing is repaired within seconds, long before that many commands pass.
const journalTail = 512

// Channel is the memory of exactly one channel (and, for recall only, the
// channels mutually linked with it by an admin). It implements
// core.ChannelMemory for the run engine's tools, core.TurnRecaller for the
// engine's automatic recall, and adds the admin operations. Handles are
// cheap; make one per use with Service.For.
type Channel struct {
	s      *Service
	ch     core.ChannelKey
	scope  core.Scope
	thread string
	err    error
}

var (
	_ core.ChannelMemory = (*Channel)(nil)
	_ core.TurnRecaller  = (*Channel)(nil)
	_ core.MemoryLister  = (*Channel)(nil)
)

// Key is the channel the handle is bound to.
func (c *Channel) Key() core.ChannelKey { return c.ch }

// Thread returns a handle that also knows the thread it serves: its recalls
// skip memories already injected in that thread within the dedup window,
// and its commands carry the thread in their scope.
func (c *Channel) Thread(thread string) *Channel {
	cc := *c
	cc.thread = thread
	cc.scope.Thread = thread
	return &cc
}

// Remember is a request the harness adjudicates: the text is cleaned and
// capped, the provenance stamped (origin command, actor, trust class,
// derivation), memory.written journaled first and indexed second. It is
// idempotent on prov.Origin: a tool call re-executed after a crash gets the
// memory of its first execution back, even when that execution was
// journaled but never indexed.
func (c *Channel) Remember(ctx context.Context, text string, prov core.Provenance) (string, error) {
	e, err := c.remember(ctx, text, prov)
	return e.ID, err
}

func (c *Channel) remember(ctx context.Context, text string, prov core.Provenance) (Entry, error) {
	if c.err != nil {
		return Entry{}, fmt.Errorf("remember: %w", c.err)
	}
	s := c.s
	text, err := s.validText(text)
	if err != nil {
		return Entry{}, fmt.Errorf("remember: %w", err)
	}
	prov, err = c.stamp(prov)
	if err != nil {
		return Entry{}, fmt.Errorf("remember: %w", err)
	}
	if prov.Origin != "" {
		mu := s.originLock(c.ch, prov.Origin)
		mu.Lock()
		defer mu.Unlock()
		e, err := s.ix.ByOrigin(ctx, c.ch, prov.Origin)
		if err == nil {
			s.metrics.duplicates.Add(1)
			return e, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Entry{}, fmt.Errorf("remember: look up origin %s: %w", prov.Origin, err)
		}
		e, found, err := c.journaled(ctx, prov)
		if err != nil {
			return Entry{}, fmt.Errorf("remember: %w", err)
		}
		if found {
			// Journaled by an execution that died before indexing: index
			// that memory rather than writing a second one.
			s.log.InfoContext(ctx, "memory: indexing a journaled memory on retry", "channel", c.ch, "memory", e.ID, "origin", prov.Origin)
			s.metrics.duplicates.Add(1)
			return c.index(ctx, e)
		}
	}
	// The same note twice is one memory: the second remember says so
	// (core.DuplicateMemoryError) instead of storing it again.
	tl := s.textLock(c.ch, sameTextKey(text))
	tl.Lock()
	defer tl.Unlock()
	if e, ok, err := c.sameText(ctx, text); err != nil {
		return Entry{}, fmt.Errorf("remember: look for the same note: %w", err)
	} else if ok {
		s.metrics.duplicates.Add(1)
		return e, &core.DuplicateMemoryError{ID: e.ID}
	}
	d, err := s.draft(prov.Actor, c.scope, core.Meta{Cause: prov.Origin},
		&core.MemoryWritten{MemoryID: s.b.NewID(), Text: text, Provenance: prov})
	if err != nil {
		return Entry{}, fmt.Errorf("remember: %w", err)
	}
	cmds, err := s.j.Append(ctx, d)
	if err != nil {
		return Entry{}, fmt.Errorf("remember: journal: %w", err)
	}
	e, err := entryOf(cmds[0])
	if err != nil {
		return Entry{}, fmt.Errorf("remember: %w", err)
	}
	e, err = c.index(ctx, e)
	if err == nil {
		s.metrics.remembers.Add(1)
	}
	return e, err
}

// sameTextKey is what two notes share when they say the same thing:
// their words, case and spacing aside.
func sameTextKey(text string) string { return strings.Join(strings.Fields(strings.ToLower(text)), " ") }

// sameText finds a live memory of this channel with the same text.
func (c *Channel) sameText(ctx context.Context, text string) (Entry, bool, error) {
	terms := Terms(text)
	if len(terms) == 0 {
		return Entry{}, false, nil
	}
	cands, err := c.s.ix.Search(ctx, SearchQuery{Channel: c.ch, Terms: terms, K: 50})
	if err != nil {
		return Entry{}, false, err
	}
	want := sameTextKey(text)
	for _, h := range cands.Lexical {
		if h.Channel == c.ch && sameTextKey(h.Text) == want {
			e, err := c.s.ix.Get(ctx, c.ch, h.ID)
			if err != nil {
				return Entry{}, false, err
			}
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// index stores a journaled memory and, best effort, its embedding.
func (c *Channel) index(ctx context.Context, e Entry) (Entry, error) {
	stored, inserted, err := c.s.ix.Insert(ctx, e)
	if err != nil {
		// The journal has it: a retry of the same origin or a rebuild
		// indexes it.
		return Entry{}, fmt.Errorf("remember: journaled as %s but not indexed (a retry or `bot memory rebuild` repairs it): %w", e.ID, err)
	}
	if inserted {
		c.s.embedEntries(ctx, c.ch, []Entry{stored})
	}
	return stored, nil
}

// journaled finds an earlier memory.written of prov.Origin in the journal:
// in the writing run's commands, or in the channel's last commands.
func (c *Channel) journaled(ctx context.Context, prov core.Provenance) (Entry, bool, error) {
	var cmds []core.Command
	var err error
	if prov.Actor.Type == core.ActorAgent {
		cmds, err = c.s.j.ReadRun(ctx, prov.Actor.ID)
	} else {
		var head uint64
		head, _, err = c.s.j.Head(ctx, c.ch)
		if err == nil && head > 0 {
			from := uint64(1)
			if head > journalTail {
				from = head - journalTail + 1
			}
			cmds, err = c.s.j.Read(ctx, c.ch, from, 0)
		}
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("search the journal for origin %s: %w", prov.Origin, err)
	}
	for _, cmd := range cmds {
		if cmd.Kind() != core.KindMemoryWritten || cmd.Channel() != c.ch || cmd.Redacted() {
			continue
		}
		p, err := core.Decode[*core.MemoryWritten](cmd)
		if err != nil {
			return Entry{}, false, err
		}
		if p.Provenance.Origin == prov.Origin {
			e, err := entryOf(cmd)
			return e, err == nil, err
		}
	}
	return Entry{}, false, nil
}

// stamp fills and checks provenance: the actor defaults to the system, the
// trust class to untrusted (a memory is data from a conversation, never an
// order), the derivation to "remember".
func (c *Channel) stamp(prov core.Provenance) (core.Provenance, error) {
	prov.Origin = strings.TrimSpace(prov.Origin)
	switch prov.Actor.Type {
	case core.ActorAgent, core.ActorHuman:
		if prov.Actor.ID == "" {
			return prov, fmt.Errorf("provenance: %s actor without an id", prov.Actor.Type)
		}
	case core.ActorSystem, "":
		prov.Actor.Type = core.ActorSystem
		if prov.Actor.ID == "" {
			prov.Actor.ID = systemActor
		}
	default:
		return prov, fmt.Errorf("provenance: unknown actor type %q", prov.Actor.Type)
	}
	// The boundary stamps the platform from the scope; provenance agrees.
	prov.Actor.Platform = c.scope.Platform
	switch core.Trust(prov.Trust) {
	case core.Trusted, core.Untrusted:
	case "":
		prov.Trust = string(core.Untrusted)
	default:
		return prov, fmt.Errorf("provenance: unknown trust class %q", prov.Trust)
	}
	prov.Derivation = truncate(clean(prov.Derivation), 200)
	if prov.Derivation == "" {
		prov.Derivation = "remember"
	}
	return prov, nil
}

func (s *Service) validText(text string) (string, error) {
	text = clean(text)
	if text == "" {
		s.metrics.rejected.Add(1)
		return "", ErrEmpty
	}
	if n := utf8.RuneCountInString(text); n > s.opt.MaxTextLen {
		s.metrics.rejected.Add(1)
		return "", fmt.Errorf("%w: %d characters, at most %d (keep one fact per memory)", ErrTooLong, n, s.opt.MaxTextLen)
	}
	return text, nil
}

// entryOf is the live entry a memory.written command describes.
func entryOf(cmd core.Command) (Entry, error) {
	p, err := core.Decode[*core.MemoryWritten](cmd)
	if err != nil {
		return Entry{}, err
	}
	return Entry{
		ID: p.MemoryID, Channel: cmd.Channel(), Seq: cmd.Seq(), Text: p.Text,
		Provenance: p.Provenance, CreatedAt: cmd.At(),
	}, nil
}

// Forget removes a memory from recall and injection (core.ChannelMemory):
// memory.forgotten is journaled, the index keeps a tombstone. The engine's
// handle carries no run, so the command is attributed to the system; use
// ForgetAs to name the actor.
func (c *Channel) Forget(ctx context.Context, id, reason string) error {
	return c.ForgetAs(ctx, core.Actor{}, id, reason)
}

// ForgetAs is Forget attributed to by. Forgetting a forgotten memory is a
// no-op; an id this channel does not hold is ErrNotFound.
func (c *Channel) ForgetAs(ctx context.Context, by core.Actor, id, reason string) error {
	if c.err != nil {
		return fmt.Errorf("forget: %w", c.err)
	}
	s := c.s
	id = strings.TrimSpace(id)
	reason = truncate(clean(reason), 500)
	mu := s.originLock(c.ch, "id:"+id)
	mu.Lock()
	defer mu.Unlock()
	e, err := s.ix.Get(ctx, c.ch, id)
	if err != nil {
		return fmt.Errorf("forget %q: %w", id, err)
	}
	if !e.Live() {
		return nil
	}
	d, err := s.draft(by, c.scope, core.Meta{}, &core.MemoryForgotten{MemoryID: id, Reason: reason})
	if err != nil {
		return fmt.Errorf("forget %s: %w", id, err)
	}
	cmds, err := s.j.Append(ctx, d)
	if err != nil {
		return fmt.Errorf("forget %s: journal: %w", id, err)
	}
	if err := s.ix.Forget(ctx, c.ch, id, reason, cmds[0].At()); err != nil {
		return fmt.Errorf("forget %s: journaled but not indexed (a retry or rebuild repairs it): %w", id, err)
	}
	s.metrics.forgets.Add(1)
	return nil
}

// Delete destroys a memory (a privacy deletion, ARCHITECTURE.md section 4);
// it is Erase without the report.
func (c *Channel) Delete(ctx context.Context, by core.Actor, id, reason string) error {
	_, err := c.Erase(ctx, by, id, reason)
	return err
}

// Erase destroys a memory and its text in the channel's journal (a privacy
// deletion, docs/privacy.md): every erasable command of the channel whose
// payload carries the memory's text (core.CarriesText: the message that
// asked for it, model steps, tool requests and results, posts, runs'
// recorded history) is redacted through Journal.Redact, then the
// memory.written command itself; each redaction appends a signed
// command.redacted in by's name naming the command's seq, id and kind, so
// the chain still verifies. memory.redacted is journaled last and the index
// drops the text, provenance and vectors, keeping only a tombstone. Other
// memories whose text contains this one are not touched (the report names
// them); approval and audit records quoting it are restated without it
// (Restated), and routines and policy are kept (counted in Kept). It is resumable: an Erase interrupted halfway completes
// when called again (the memory.written payload is redacted only after the
// sweep), and erasing a deleted memory is a no-op with an empty report.
func (c *Channel) Erase(ctx context.Context, by core.Actor, id, reason string) (core.Erasure, error) {
	var out core.Erasure
	if c.err != nil {
		return out, fmt.Errorf("delete: %w", c.err)
	}
	s := c.s
	id = strings.TrimSpace(id)
	reason = truncate(clean(reason), 500)
	if reason == "" {
		reason = "memory deleted"
	}
	mu := s.originLock(c.ch, "id:"+id)
	mu.Lock()
	defer mu.Unlock()
	e, err := s.ix.Get(ctx, c.ch, id)
	if err != nil {
		return out, fmt.Errorf("delete %q: %w", id, err)
	}
	if e.Deleted {
		return out, nil
	}
	cmds, err := s.j.Read(ctx, c.ch, e.Seq, 1)
	if err != nil {
		return out, fmt.Errorf("delete %s: read seq %d: %w", id, e.Seq, err)
	}
	if len(cmds) == 0 || cmds[0].Seq() != e.Seq || cmds[0].Kind() != core.KindMemoryWritten {
		return out, fmt.Errorf("delete %s: the index points at seq %d, which is not its memory.written (rebuild the index)", id, e.Seq)
	}
	written := cmds[0]
	redact := func(target core.Command) error {
		rd, err := s.draft(by, c.scope, core.Meta{Cause: target.ID()},
			&core.CommandRedacted{Seq: target.Seq(), ID: target.ID(), Reason: reason, TargetKind: target.Kind().String()})
		if err != nil {
			return err
		}
		if _, err := s.j.Redact(ctx, target.Seq(), rd); err != nil {
			return fmt.Errorf("redact seq %d: %w", target.Seq(), err)
		}
		out.Add(target.Kind())
		return nil
	}
	if !written.Redacted() {
		p, err := core.Decode[*core.MemoryWritten](written)
		if err != nil {
			return out, fmt.Errorf("delete %s: %w", id, err)
		}
		if p.MemoryID != id {
			return out, fmt.Errorf("delete %s: seq %d wrote memory %s (rebuild the index)", id, e.Seq, p.MemoryID)
		}
		if err := c.sweep(ctx, by, reason, p.Text, written.Seq(), redact, &out); err != nil {
			return out, fmt.Errorf("delete %s: erase its text from the journal (say it again to finish): %w", id, err)
		}
		if err := redact(written); err != nil {
			return out, fmt.Errorf("delete %s: %w", id, err)
		}
	}
	md, err := s.draft(by, c.scope, core.Meta{Cause: written.ID()}, &core.MemoryRedacted{MemoryID: id, Seq: e.Seq})
	if err != nil {
		return out, fmt.Errorf("delete %s: %w", id, err)
	}
	app, err := s.j.Append(ctx, md)
	if err != nil {
		return out, fmt.Errorf("delete %s: journal memory.redacted (the payload is already destroyed; retry to finish): %w", id, err)
	}
	if err := s.ix.Delete(ctx, c.ch, id, app[0].At()); err != nil {
		return out, fmt.Errorf("delete %s: journaled but not purged from the index (retry or rebuild): %w", id, err)
	}
	s.metrics.deletes.Add(1)
	s.log.InfoContext(ctx, "memory deleted", "channel", c.ch, "memory", id, "seq", e.Seq, "by", by.Type,
		"redacted", out.RemovedTotal())
	return out, nil
}

// sweep redacts every erasable command of the channel (but the memory's own
// memory.written at skip) whose payload carries text, restates the decision
// records that carry it (core.RestateIn, in by's name), and counts what
// still carries it: other memories' memory.written (by memory id) and the
// records that are not restated.
func (c *Channel) sweep(ctx context.Context, by core.Actor, reason, text string, skip uint64, redact func(core.Command) error, out *core.Erasure) error {
	const page = 1024
	// The head is read first: what the sweep's own redactions append
	// (command.redacted records) is past it and carries no text.
	head, _, err := c.s.j.Head(ctx, c.ch)
	if err != nil {
		return err
	}
	m := core.NewTextMatcher(text)
	for from := uint64(1); from <= head; {
		cmds, err := c.s.j.Read(ctx, c.ch, from, page)
		if err != nil {
			return err
		}
		for _, cmd := range cmds {
			if cmd.Seq() > head {
				return nil
			}
			if cmd.Seq() == skip || !m.Carries(cmd) {
				continue
			}
			switch {
			case core.Erasable(cmd.Kind()):
				if err := redact(cmd); err != nil {
					return err
				}
			case cmd.Kind() == core.KindMemoryWritten:
				if p, err := core.Decode[*core.MemoryWritten](cmd); err == nil {
					out.OtherMemories = append(out.OtherMemories, p.MemoryID)
				}
			default:
				// decision records lose the text (restated) where they
				// can; routines and policy keep it
				done, err := core.RestateIn(ctx, c.s.j, cmd, m, func(restated string) (core.Draft, error) {
					return c.s.draft(by, c.scope, core.Meta{Cause: cmd.ID()}, &core.CommandRedacted{
						Seq: cmd.Seq(), ID: cmd.ID(), Reason: reason, TargetKind: cmd.Kind().String(), Restated: restated})
				})
				if err != nil {
					return err
				}
				if done {
					out.Restate(cmd.Kind())
				} else {
					out.Keep(cmd.Kind())
				}
			}
		}
		if len(cmds) < page {
			return nil
		}
		from = cmds[len(cmds)-1].Seq() + 1
	}
	return nil
}

// Correct replaces a live memory's text: a new memory (derived "correction
// of <id>") and the old one's memory.forgotten are journaled in one append,
// so neither exists without the other. It returns the new memory's id.
func (c *Channel) Correct(ctx context.Context, by core.Actor, id, text string) (string, error) {
	if c.err != nil {
		return "", fmt.Errorf("correct: %w", c.err)
	}
	s := c.s
	id = strings.TrimSpace(id)
	text, err := s.validText(text)
	if err != nil {
		return "", fmt.Errorf("correct %s: %w", id, err)
	}
	mu := s.originLock(c.ch, "id:"+id)
	mu.Lock()
	defer mu.Unlock()
	old, err := s.ix.Get(ctx, c.ch, id)
	if err != nil {
		return "", fmt.Errorf("correct %q: %w", id, err)
	}
	if !old.Live() {
		return "", fmt.Errorf("correct %s: the memory is forgotten or deleted; remember the new text instead", id)
	}
	trust := core.Trusted // an admin's or the operator's own words
	if by.Type == core.ActorAgent {
		trust = core.Untrusted
	}
	prov, err := c.stamp(core.Provenance{Actor: by, Trust: string(trust), Derivation: "correction of " + id})
	if err != nil {
		return "", fmt.Errorf("correct %s: %w", id, err)
	}
	newID := s.b.NewID()
	w, err := s.draft(prov.Actor, c.scope, core.Meta{}, &core.MemoryWritten{MemoryID: newID, Text: text, Provenance: prov})
	if err != nil {
		return "", fmt.Errorf("correct %s: %w", id, err)
	}
	reason := "corrected: replaced by " + newID
	f, err := s.draft(prov.Actor, c.scope, core.Meta{Cause: w.ID()}, &core.MemoryForgotten{MemoryID: id, Reason: reason})
	if err != nil {
		return "", fmt.Errorf("correct %s: %w", id, err)
	}
	cmds, err := s.j.Append(ctx, w, f)
	if err != nil {
		return "", fmt.Errorf("correct %s: journal: %w", id, err)
	}
	e, err := entryOf(cmds[0])
	if err != nil {
		return "", fmt.Errorf("correct %s: %w", id, err)
	}
	if _, err := c.index(ctx, e); err != nil {
		return "", fmt.Errorf("correct %s: %w", id, err)
	}
	if err := s.ix.Forget(ctx, c.ch, id, reason, cmds[1].At()); err != nil {
		return "", fmt.Errorf("correct %s: journaled but the old memory is still indexed (rebuild repairs it): %w", id, err)
	}
	s.metrics.corrections.Add(1)
	return newID, nil
}

// Get returns one memory of this channel in any state.
func (c *Channel) Get(ctx context.Context, id string) (Entry, error) {
	if c.err != nil {
		return Entry{}, c.err
	}
	e, err := c.s.ix.Get(ctx, c.ch, strings.TrimSpace(id))
	if err != nil {
		return Entry{}, fmt.Errorf("get memory %q: %w", id, err)
	}
	return e, nil
}

// List returns this channel's memories for admins, newest first.
func (c *Channel) List(ctx context.Context, q ListQuery) ([]Entry, error) {
	if c.err != nil {
		return nil, c.err
	}
	out, err := c.s.ix.List(ctx, c.ch, q)
	if err != nil {
		return nil, fmt.Errorf("list memories of %s: %w", c.ch, err)
	}
	return out, nil
}

// ListMemories implements core.MemoryLister: the channel's live memories,
// newest first, from offset.
func (c *Channel) ListMemories(ctx context.Context, offset, limit int) ([]core.MemoryInfo, error) {
	if offset < 0 {
		offset = 0
	}
	es, err := c.List(ctx, ListQuery{Offset: offset, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]core.MemoryInfo, len(es))
	for i, e := range es {
		out[i] = infoOf(e)
	}
	return out, nil
}

// DescribeMemory returns one memory of this channel in any state (the
// engine's `delete memory` checks its author with it).
func (c *Channel) DescribeMemory(ctx context.Context, id string) (core.MemoryInfo, error) {
	e, err := c.Get(ctx, id)
	if err != nil {
		return core.MemoryInfo{}, err
	}
	return infoOf(e), nil
}

func infoOf(e Entry) core.MemoryInfo {
	return core.MemoryInfo{ID: e.ID, Text: e.Text, At: e.CreatedAt, By: e.Provenance.Actor,
		Forgotten: e.Forgotten, Deleted: e.Deleted}
}

// embedEntries embeds live entries and stores their vectors, best effort:
// a memory without a vector is still found lexically, and a rebuild embeds
// it later.
func (s *Service) embedEntries(ctx context.Context, ch core.ChannelKey, es []Entry) int {
	if s.emb == nil || len(es) == 0 {
		return 0
	}
	texts := make([]string, len(es))
	for i, e := range es {
		texts[i] = e.Text
	}
	vecs, model, err := s.embed(ctx, texts)
	if err != nil {
		s.log.WarnContext(ctx, "memory: embedding failed; the memory is recalled lexically until a rebuild", "channel", ch, "err", err)
		return 0
	}
	n := 0
	for i, e := range es {
		if err := s.ix.SetVector(ctx, ch, Vector{MemoryID: e.ID, Model: model, Values: vecs[i]}); err != nil {
			s.log.WarnContext(ctx, "memory: store vector", "channel", ch, "memory", e.ID, "err", err)
			continue
		}
		n++
	}
	return n
}

// embed calls the embedder and checks its answer's shape.
func (s *Service) embed(ctx context.Context, texts []string) ([][]float32, string, error) {
	vecs, model, err := s.emb.Embed(ctx, texts)
	if err == nil {
		err = checkVectors(vecs, model, len(texts))
	}
	if err != nil {
		s.metrics.embedErrors.Add(1)
		return nil, "", fmt.Errorf("embed %d text(s): %w", len(texts), err)
	}
	return vecs, model, nil
}

func checkVectors(vecs [][]float32, model string, n int) error {
	if model == "" {
		return errors.New("embedder did not name its model")
	}
	if len(vecs) != n {
		return fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), n)
	}
	for _, v := range vecs {
		if len(v) == 0 || len(v) != len(vecs[0]) {
			return fmt.Errorf("embedder returned vectors of mixed or zero dimension")
		}
	}
	return nil
}
