package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// RebuildOptions tunes a rebuild.
type RebuildOptions struct {
	// Reembed recomputes every live memory's vector with the configured
	// embedder instead of reusing the index's vector for unchanged text.
	Reembed bool
	// DryRun computes and reports, but leaves the index as it is.
	DryRun bool
}

// RebuildReport says what a rebuild found and did for one channel.
type RebuildReport struct {
	Channel   core.ChannelKey
	Commands  int // journal commands read
	Live      int
	Forgotten int // forgotten, not deleted
	Deleted   int // tombstones
	Links     int // channels this channel's policy links to
	Reused    int // vectors kept from the index (unchanged text)
	Embedded  int // vectors computed
	// Unembedded counts live memories left without a vector of the current
	// model (no embedder, or it failed): they are recalled lexically.
	Unembedded int
	// Orphans counts memory.written commands whose payload was redacted
	// with no memory.redacted and no index row to name the memory: their
	// text is gone, so nothing is indexed for them.
	Orphans  int
	Changed  bool // the rebuilt content differs from what the index held
	Duration time.Duration
}

// embedBatch is how many texts one embedder call carries during a rebuild.
const embedBatch = 64

// Rebuild recomputes ch's index from the journal's memory.*,
// command.redacted and policy.changed commands, to exactly the state the
// live path produces: forgotten stays forgotten, deleted stays a tombstone
// without text, links follow the last policy. Vectors of unchanged text are
// reused unless opts.Reembed; missing ones are embedded. The swap is atomic.
func (s *Service) Rebuild(ctx context.Context, ch core.ChannelKey, opts RebuildOptions) (RebuildReport, error) {
	start := time.Now()
	rep := RebuildReport{Channel: ch}
	if _, err := core.ParseChannelKey(string(ch)); err != nil {
		return rep, fmt.Errorf("rebuild: %w", err)
	}
	var cmds []core.Command
	err := readAll(ctx, s.j, ch, func(c core.Command) error {
		rep.Commands++
		switch c.Kind() {
		case core.KindMemoryWritten, core.KindMemoryForgotten, core.KindMemoryRedacted,
			core.KindCommandRedacted, core.KindPolicyChanged:
			cmds = append(cmds, c)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: %w", ch, err)
	}
	old, err := s.ix.Snapshot(ctx, ch)
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: read the index: %w", ch, err)
	}
	// The index may name a memory whose memory.written was redacted by
	// a privacy deletion outside Delete: the id lets its tombstone be kept.
	known := make(map[uint64]string, len(old.Entries))
	for _, e := range old.Entries {
		known[e.Seq] = e.ID
	}
	next, orphans, err := Fold(ch, cmds, known)
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: %w", ch, err)
	}
	rep.Orphans = orphans
	rep.Links = len(next.Links)
	next.Vectors, err = s.rebuildVectors(ctx, ch, next.Entries, old, opts, &rep)
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: %w", ch, err)
	}
	for _, e := range next.Entries {
		switch {
		case e.Deleted:
			rep.Deleted++
		case e.Forgotten:
			rep.Forgotten++
		default:
			rep.Live++
		}
	}
	rep.Changed = !SnapshotsEqual(old, next)
	if !opts.DryRun && rep.Changed {
		if err := s.ix.Replace(ctx, ch, next); err != nil {
			return rep, fmt.Errorf("rebuild %s: replace: %w", ch, err)
		}
	}
	rep.Duration = time.Since(start)
	s.log.InfoContext(ctx, "memory index rebuilt", "channel", ch, "live", rep.Live, "forgotten", rep.Forgotten,
		"deleted", rep.Deleted, "embedded", rep.Embedded, "reused", rep.Reused, "unembedded", rep.Unembedded,
		"changed", rep.Changed, "dry_run", opts.DryRun, "took", rep.Duration)
	return rep, nil
}

// RebuildAll rebuilds every channel the journal holds.
func (s *Service) RebuildAll(ctx context.Context, opts RebuildOptions) ([]RebuildReport, error) {
	chs, err := s.j.Channels(ctx)
	if err != nil {
		return nil, fmt.Errorf("rebuild all: list channels: %w", err)
	}
	var out []RebuildReport
	for _, ch := range chs {
		rep, err := s.Rebuild(ctx, ch, opts)
		out = append(out, rep)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Fold computes a channel's index content (entries and declared links, no
// vectors) from its memory.*, command.redacted and policy.changed commands in
// seq order. known maps memory.written seqs to memory ids the caller already
// knows (from the index), for memories whose payload was redacted without a
// memory.redacted; orphans counts redacted memory.written commands whose
// memory cannot be named at all. It is pure: the same commands always give
// the same snapshot.
func Fold(ch core.ChannelKey, cmds []core.Command, known map[uint64]string) (snap Snapshot, orphans int, err error) {
	// A redacted memory.written no longer says which memory it wrote: the
	// memory.redacted (or, failing that, the index) does.
	redactedID := map[uint64]string{}
	redactedAt := map[uint64]time.Time{} // command.redacted time per target seq
	for _, c := range cmds {
		if c.Redacted() {
			continue
		}
		switch c.Kind() {
		case core.KindMemoryRedacted:
			p, err := core.Decode[*core.MemoryRedacted](c)
			if err != nil {
				return snap, 0, err
			}
			if _, dup := redactedID[p.Seq]; !dup {
				redactedID[p.Seq] = p.MemoryID
			}
		case core.KindCommandRedacted:
			p, err := core.Decode[*core.CommandRedacted](c)
			if err != nil {
				return snap, 0, err
			}
			if _, dup := redactedAt[p.Seq]; !dup {
				redactedAt[p.Seq] = c.At()
			}
		}
	}
	byID := map[string]*Entry{}
	origins := map[string]bool{}
	for _, c := range cmds {
		if c.Redacted() && c.Kind() != core.KindMemoryWritten {
			continue // a redacted memory command carries nothing to apply
		}
		switch c.Kind() {
		case core.KindMemoryWritten:
			if c.Redacted() {
				id, ok := redactedID[c.Seq()]
				if !ok {
					id, ok = known[c.Seq()]
				}
				if !ok {
					orphans++
					continue
				}
				if byID[id] == nil {
					byID[id] = &Entry{ID: id, Channel: ch, Seq: c.Seq(), CreatedAt: c.At()}
				}
				if _, via := redactedID[c.Seq()]; !via {
					// Redacted outside Delete: destroyed all the same.
					destroy(byID[id], redactedAt[c.Seq()])
				}
				continue
			}
			e, err := entryOf(c)
			if err != nil {
				return snap, 0, err
			}
			if byID[e.ID] != nil || (e.Provenance.Origin != "" && origins[e.Provenance.Origin]) {
				continue // a second write of one origin (a cross-replica race): the first stands
			}
			if e.Provenance.Origin != "" {
				origins[e.Provenance.Origin] = true
			}
			byID[e.ID] = &e
		case core.KindMemoryForgotten:
			p, err := core.Decode[*core.MemoryForgotten](c)
			if err != nil {
				return snap, 0, err
			}
			if e := byID[p.MemoryID]; e != nil && !e.Forgotten {
				e.Forgotten, e.ForgottenAt, e.ForgetReason = true, c.At(), p.Reason
			}
		case core.KindMemoryRedacted:
			p, err := core.Decode[*core.MemoryRedacted](c)
			if err != nil {
				return snap, 0, err
			}
			if e := byID[p.MemoryID]; e != nil && !e.Deleted {
				destroy(e, c.At())
			}
		case core.KindPolicyChanged:
			p, err := core.Decode[*core.PolicyChanged](c)
			if err != nil {
				return snap, 0, err
			}
			snap.Links = normLinks(ch, p.Policy.LinkedChannels)
		case core.KindCommandRedacted:
			// Applied through the memory.written it targets.
		default:
		}
	}
	for _, e := range byID {
		snap.Entries = append(snap.Entries, *e)
	}
	slices.SortFunc(snap.Entries, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return snap, orphans, nil
}

// destroy turns an entry into a deletion tombstone, exactly as the index's
// Delete does.
func destroy(e *Entry, at time.Time) {
	e.Text, e.Provenance, e.ForgetReason = "", core.Provenance{}, ""
	e.Deleted, e.DeletedAt = true, at
	if !e.Forgotten {
		e.Forgotten, e.ForgottenAt = true, at
	}
}

// rebuildVectors keeps the index's vectors of live memories whose text is
// unchanged (every model: an older model's index stays beside the new one)
// and embeds the live memories that lack a vector of the current model (all
// of them with opts.Reembed).
func (s *Service) rebuildVectors(ctx context.Context, ch core.ChannelKey, entries []Entry, old Snapshot, opts RebuildOptions, rep *RebuildReport) ([]Vector, error) {
	oldText := map[string]string{}
	for _, e := range old.Entries {
		if e.Live() {
			oldText[e.ID] = e.Text
		}
	}
	oldVecs := map[string][]Vector{}
	for _, v := range old.Vectors {
		oldVecs[v.MemoryID] = append(oldVecs[v.MemoryID], v)
	}
	var live []Entry
	for _, e := range entries {
		if e.Live() {
			live = append(live, e)
		}
	}
	// The current model is known only from an embedder answer: probe it
	// with one text.
	model := ""
	if s.emb != nil && len(live) > 0 {
		if _, m, err := s.embed(ctx, []string{live[0].Text}); err == nil {
			model = m
		} else {
			s.log.WarnContext(ctx, "memory rebuild: embedder unavailable; keeping existing vectors only", "channel", ch, "err", err)
		}
	}
	var out []Vector
	var todo []Entry
	for _, e := range live {
		t, ok := oldText[e.ID]
		unchanged := ok && t == e.Text
		hasModel := false
		if unchanged {
			for _, v := range oldVecs[e.ID] {
				if model != "" && v.Model == model {
					hasModel = true
					if opts.Reembed {
						continue // recomputed below
					}
				}
				out = append(out, v)
				rep.Reused++
			}
		}
		if model != "" && (opts.Reembed || !hasModel) {
			todo = append(todo, e)
		}
	}
	for i := 0; i < len(todo); i += embedBatch {
		batch := todo[i:min(i+embedBatch, len(todo))]
		texts := make([]string, len(batch))
		for j, e := range batch {
			texts[j] = e.Text
		}
		vecs, m, err := s.embed(ctx, texts)
		if err == nil && m != model {
			err = fmt.Errorf("embedder switched model from %q to %q during the rebuild", model, m)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			s.log.WarnContext(ctx, "memory rebuild: embedding failed; these memories stay lexical-only", "channel", ch, "count", len(batch), "err", err)
			continue
		}
		for j, e := range batch {
			out = append(out, Vector{MemoryID: e.ID, Model: m, Values: vecs[j]})
			rep.Embedded++
		}
	}
	rep.Unembedded = len(live) - countWithVector(live, out, model)
	return sortVectors(out), nil
}

// countWithVector counts live entries with a vector of model ("" = any).
func countWithVector(live []Entry, vecs []Vector, model string) int {
	has := map[string]bool{}
	for _, v := range vecs {
		if model == "" || v.Model == model {
			has[v.MemoryID] = true
		}
	}
	n := 0
	for _, e := range live {
		if has[e.ID] {
			n++
		}
	}
	return n
}

func sortVectors(vs []Vector) []Vector {
	slices.SortFunc(vs, func(a, b Vector) int {
		return cmp.Or(strings.Compare(a.MemoryID, b.MemoryID), strings.Compare(a.Model, b.Model))
	})
	return vs
}

// SnapshotsEqual compares two snapshots row for row (times to the
// microsecond, the precision every store keeps).
func SnapshotsEqual(a, b Snapshot) bool { return SnapshotDiff(a, b) == "" }

// SnapshotDiff describes the first difference between two snapshots, ""
// when they are equal.
func SnapshotDiff(a, b Snapshot) string {
	if !slices.Equal(a.Links, b.Links) {
		return fmt.Sprintf("links: %v vs %v", a.Links, b.Links)
	}
	if len(a.Entries) != len(b.Entries) {
		return fmt.Sprintf("entries: %d vs %d", len(a.Entries), len(b.Entries))
	}
	for i := range a.Entries {
		x, y := normEntry(a.Entries[i]), normEntry(b.Entries[i])
		if !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("entry %d:\n  %+v\nvs\n  %+v", i, x, y)
		}
	}
	if len(a.Vectors) != len(b.Vectors) {
		return fmt.Sprintf("vectors: %d vs %d", len(a.Vectors), len(b.Vectors))
	}
	for i := range a.Vectors {
		x, y := a.Vectors[i], b.Vectors[i]
		if x.MemoryID != y.MemoryID || x.Model != y.Model || !slices.Equal(x.Values, y.Values) {
			return fmt.Sprintf("vector %d: %s/%s (%d dims) vs %s/%s (%d dims)", i, x.MemoryID, x.Model, len(x.Values), y.MemoryID, y.Model, len(y.Values))
		}
	}
	return ""
}

func normEntry(e Entry) Entry {
	t := func(x time.Time) time.Time {
		if x.IsZero() {
			return time.Time{}
		}
		return x.UTC().Truncate(time.Microsecond)
	}
	e.CreatedAt, e.ForgottenAt, e.DeletedAt = t(e.CreatedAt), t(e.ForgottenAt), t(e.DeletedAt)
	return e
}

// RebuildArgs are the flags of `bot memory rebuild`.
type RebuildArgs struct {
	Channel string // --channel platform/workspace/channel
	All     bool   // --all
	Reembed bool   // --reembed
	DryRun  bool   // --dry-run
}

// RebuildCommand runs `bot memory rebuild --channel KEY | --all [--reembed]
// [--dry-run]` against s and prints one line per channel to out. Exactly one
// of Channel and All must be set.
func RebuildCommand(ctx context.Context, s *Service, args RebuildArgs, out io.Writer) error {
	if (args.Channel == "") == !args.All {
		return errors.New("memory rebuild: give exactly one of --channel KEY or --all")
	}
	opts := RebuildOptions{Reembed: args.Reembed, DryRun: args.DryRun}
	var reps []RebuildReport
	var err error
	if args.All {
		reps, err = s.RebuildAll(ctx, opts)
	} else {
		var sc core.Scope
		if sc, err = core.ParseChannelKey(args.Channel); err != nil {
			return fmt.Errorf("memory rebuild: %w", err)
		}
		var rep RebuildReport
		rep, err = s.Rebuild(ctx, sc.Key(), opts)
		reps = []RebuildReport{rep}
	}
	for _, r := range reps {
		verb := "rebuilt"
		switch {
		case args.DryRun && r.Changed:
			verb = "would change"
		case !r.Changed:
			verb = "unchanged"
		}
		// Without an embedding model no note has a vector, by design:
		// nothing is "missing".
		vectors := fmt.Sprintf("vectors %d reused, %d embedded, %d missing", r.Reused, r.Embedded, r.Unembedded)
		if s.emb == nil {
			vectors = "no vectors (no embedding model: recall is by keywords)"
		}
		fmt.Fprintf(out, "%s: %s — %d live, %d forgotten, %d deleted, %d links; %s; %d orphaned redactions; %d commands read in %s\n",
			r.Channel, verb, r.Live, r.Forgotten, r.Deleted, r.Links, vectors, r.Orphans, r.Commands, r.Duration.Round(time.Millisecond))
	}
	if err != nil {
		return fmt.Errorf("memory rebuild: %w", err)
	}
	return nil
}
