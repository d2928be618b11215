package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// Snippet is one memory as injected into a turn: its text cut to the
// per-snippet budget.
type Snippet struct {
	ID        string
	Channel   core.ChannelKey // differs from the handle's channel for a linked channel's memory
	Text      string
	CreatedAt time.Time
	// Score is the reciprocal-rank-fusion score.
	Score float64
	// Similarity is the dense cosine similarity (0 when the memory came
	// from the lexical cue only).
	Similarity float64
	Dense      bool // passed the floor in the dense cue
	Lexical    bool // matched the lexical cue
	Query      int  // index of the query (of a turn) that found it
}

// Linked reports whether the snippet comes from a linked channel.
func (s Snippet) Linked(own core.ChannelKey) bool { return s.Channel != own }

// Result is what one recall (a query, or a turn's queries) injects and what
// it cost.
type Result struct {
	Snippets []Snippet
	// Chars and Tokens are the injected size; Tokens is the estimate
	// Chars/4. Both are bounded by the budget whatever the memory's size.
	Chars  int
	Tokens int
	// Latency is the wall time of the recall, embedding included.
	Latency time.Duration
	// Degraded is true when the recall was lexical only: no embedder is
	// configured, or it failed. The run should say so ("degraded").
	Degraded bool
	// Model is the embedding model of the dense cue ("" when degraded).
	Model string
	// Floor is the similarity floor applied.
	Floor float64
	// TopSimilarity is the best dense similarity before the floor (0
	// without a dense cue); BelowFloor counts dense candidates the floor
	// dropped.
	TopSimilarity float64
	BelowFloor    int
	// Suppressed counts hits left out because this thread was already
	// given them within the dedup window.
	Suppressed int
}

// Recalled converts the snippets for core.ChannelMemory. A linked channel's
// memory says where it is from, so the model does not take it for this
// channel's.
func (r Result) Recalled(own core.ChannelKey) []core.Recalled {
	out := make([]core.Recalled, 0, len(r.Snippets))
	for _, s := range r.Snippets {
		text := s.Text
		if s.Linked(own) {
			text = "(from linked channel " + string(s.Channel) + ") " + text
		}
		out = append(out, core.Recalled{ID: s.ID, Text: text, Score: s.Score})
	}
	return out
}

// Recall is core.ChannelMemory's recall: one query, at most
// min(limit, Options.PerQuery) snippets (the per-query budget wins over a
// larger limit).
func (c *Channel) Recall(ctx context.Context, query string, limit int) ([]core.Recalled, error) {
	r, err := c.RecallResult(ctx, query, limit)
	if err != nil {
		return nil, err
	}
	return r.Recalled(c.ch), nil
}

// RecallWithStatus is Recall plus whether it was degraded (lexical only).
// The engine's recall tool can detect it without importing this package:
//
//	if m, ok := tc.Memory.(interface {
//		RecallWithStatus(context.Context, string, int) ([]core.Recalled, bool, error)
//	}); ok { ... }
func (c *Channel) RecallWithStatus(ctx context.Context, query string, limit int) ([]core.Recalled, bool, error) {
	r, err := c.RecallResult(ctx, query, limit)
	if err != nil {
		return nil, false, err
	}
	return r.Recalled(c.ch), r.Degraded, nil
}

// RecallResult is one query's recall with its cost, latency and mode.
func (c *Channel) RecallResult(ctx context.Context, query string, limit int) (Result, error) {
	return c.recall(ctx, []string{query}, limit)
}

// RecallTurn is a turn's recall: each query yields at most
// Options.PerQuery snippets and the turn at most Options.MaxSnippets, each
// cut to Options.MaxChars, a memory appearing once. Per-turn cost is thus a
// constant, however large the memory grows.
func (c *Channel) RecallTurn(ctx context.Context, queries ...string) (Result, error) {
	return c.recall(ctx, queries, 0)
}

// RecallForTurn is core.TurnRecaller, the engine's automatic recall for a
// turn's new messages: RecallTurn through the handle of thread, so a memory
// already injected in that thread within the dedup window is not injected
// again ("" = no thread, no dedup).
func (c *Channel) RecallForTurn(ctx context.Context, thread string, queries ...string) (core.TurnRecall, error) {
	h := c
	if thread != "" {
		h = c.Thread(thread)
	}
	r, err := h.RecallTurn(ctx, queries...)
	if err != nil {
		return core.TurnRecall{}, err
	}
	return core.TurnRecall{Snippets: r.Recalled(c.ch), Degraded: r.Degraded, Tokens: r.Tokens}, nil
}

func (c *Channel) recall(ctx context.Context, queries []string, limit int) (Result, error) {
	start := time.Now()
	if c.err != nil {
		return Result{}, fmt.Errorf("recall: %w", c.err)
	}
	s := c.s
	qs := make([]string, 0, len(queries))
	for _, q := range queries {
		if q = clean(q); q != "" && !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	if len(qs) > s.opt.MaxSnippets {
		qs = qs[:s.opt.MaxSnippets] // more queries than slots cannot add anything
	}
	perQuery := s.opt.PerQuery
	if limit > 0 {
		perQuery = min(limit, perQuery)
	}
	res := Result{Floor: s.Floor(), Degraded: s.emb == nil}
	var vecs [][]float32
	if !res.Degraded && len(qs) > 0 {
		var err error
		vecs, res.Model, err = s.embed(ctx, qs)
		if err != nil {
			s.log.WarnContext(ctx, "memory: query embedding failed; recall is lexical only", "channel", c.ch, "err", err)
			res.Degraded = true
		}
	}
	now := s.b.Now()
	taken := map[string]bool{}
	for qi, q := range qs {
		sq := SearchQuery{Channel: c.ch, Terms: Terms(q), K: s.opt.Candidates}
		if !res.Degraded {
			sq.Vector, sq.Model = vecs[qi], res.Model
		}
		if len(sq.Terms) == 0 && sq.Vector == nil {
			continue
		}
		cands, err := s.ix.Search(ctx, sq)
		if err != nil {
			return Result{}, fmt.Errorf("recall in %s: %w", c.ch, err)
		}
		fused, top, below := fuse(cands, res.Floor, s.opt.RRFK)
		if len(cands.Dense) > 0 {
			s.metrics.topSim.observe(top)
			res.TopSimilarity = max(res.TopSimilarity, top)
		}
		res.BelowFloor += below
		n := 0
		for _, f := range fused {
			if n == perQuery || len(res.Snippets) == s.opt.MaxSnippets {
				break
			}
			if taken[f.ID] {
				continue
			}
			if c.thread != "" && s.dedup.recent(c.ch, c.thread, f.ID, now) {
				res.Suppressed++
				taken[f.ID] = true
				continue
			}
			taken[f.ID] = true
			f.Query = qi
			f.Text = truncate(f.Text, s.opt.MaxChars)
			res.Chars += utf8.RuneCountInString(f.Text)
			res.Snippets = append(res.Snippets, f)
			n++
		}
	}
	if c.thread != "" && len(res.Snippets) > 0 {
		ids := make([]string, len(res.Snippets))
		for i, sn := range res.Snippets {
			ids[i] = sn.ID
		}
		s.dedup.mark(c.ch, c.thread, ids, now)
	}
	res.Tokens = estimateTokens(res.Chars)
	res.Latency = time.Since(start)
	s.metrics.belowFloor.Add(uint64(res.BelowFloor))
	s.metrics.suppressed.Add(uint64(res.Suppressed))
	s.metrics.recall(res, max(len(qs), 1))
	return res, nil
}

// fuse merges the dense and lexical candidates by reciprocal rank fusion
// (score = Σ 1/(k + rank)). Dense candidates under the floor are dropped
// before ranking, so a far neighbour cannot ride in on the dense cue; a
// lexical candidate is always a real term match (the stores only return
// matching rows), so it stays. It returns the fused list, the best dense
// similarity seen and how many dense candidates the floor dropped.
func fuse(c Candidates, floor float64, k int) (out []Snippet, top float64, below int) {
	byID := map[string]*Snippet{}
	var order []*Snippet
	get := func(h Hit) *Snippet {
		if s := byID[h.ID]; s != nil {
			return s
		}
		s := &Snippet{ID: h.ID, Channel: h.Channel, Text: h.Text, CreatedAt: h.CreatedAt}
		byID[h.ID] = s
		order = append(order, s)
		return s
	}
	rank := 0
	for i, h := range c.Dense {
		if i == 0 || h.Similarity > top {
			top = h.Similarity
		}
		if h.Similarity < floor {
			below++
			continue
		}
		rank++
		s := get(h)
		s.Dense, s.Similarity = true, h.Similarity
		s.Score += 1 / float64(k+rank)
	}
	for i, h := range c.Lexical {
		s := get(h)
		s.Lexical = true
		s.Score += 1 / float64(k+i+1)
	}
	out = make([]Snippet, len(order))
	for i, s := range order {
		out[i] = *s
	}
	slices.SortStableFunc(out, func(a, b Snippet) int {
		return cmp.Or(
			cmp.Compare(b.Score, a.Score),
			cmp.Compare(b.Similarity, a.Similarity),
			b.CreatedAt.Compare(a.CreatedAt),
			strings.Compare(a.ID, b.ID),
		)
	})
	return out, top, below
}
