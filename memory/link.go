package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/marlowe-bot/marlowe/core"
)

// Link lets channels a and b read each other's memory in recall (and only
// recall: writes, forgets and deletes stay within a channel). It journals a
// policy.changed in each channel adding the other to Policy.LinkedChannels,
// then records both sides in the index. A link takes effect only while both
// sides declare it, so one channel's policy alone can never open another
// channel's memory. by is the admin (human) or the operator (system).
func (s *Service) Link(ctx context.Context, by core.Actor, a, b core.ChannelKey) error {
	if err := checkPair(a, b); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if err := s.setLinked(ctx, by, a, b, true); err != nil {
		return fmt.Errorf("link %s and %s: %w", a, b, err)
	}
	if err := s.setLinked(ctx, by, b, a, true); err != nil {
		return fmt.Errorf("link %s and %s: %s is linked, %s is not (retry): %w", a, b, a, b, err)
	}
	s.log.InfoContext(ctx, "memory channels linked", "a", a, "b", b, "by", string(by.Type)+":"+by.ID)
	return nil
}

// Unlink ends a link; either side's removal closes it.
func (s *Service) Unlink(ctx context.Context, by core.Actor, a, b core.ChannelKey) error {
	if err := checkPair(a, b); err != nil {
		return fmt.Errorf("unlink: %w", err)
	}
	if err := s.setLinked(ctx, by, a, b, false); err != nil {
		return fmt.Errorf("unlink %s and %s: %w", a, b, err)
	}
	if err := s.setLinked(ctx, by, b, a, false); err != nil {
		return fmt.Errorf("unlink %s and %s: closed from %s's side only (retry): %w", a, b, a, err)
	}
	s.log.InfoContext(ctx, "memory channels unlinked", "a", a, "b", b)
	return nil
}

func checkPair(a, b core.ChannelKey) error {
	for _, k := range []core.ChannelKey{a, b} {
		sc, err := core.ParseChannelKey(string(k))
		if err != nil {
			return err
		}
		if sc.Key() != k {
			return fmt.Errorf("channel key %q is not canonical", k)
		}
	}
	if a == b {
		return fmt.Errorf("cannot link %s with itself", a)
	}
	return nil
}

// setLinked adds (or removes) other in ch's policy and journals the new
// policy when it changed; the index is brought in line either way, so a
// retry repairs an earlier failure.
func (s *Service) setLinked(ctx context.Context, by core.Actor, ch, other core.ChannelKey, on bool) error {
	pol, err := s.currentPolicy(ctx, ch)
	if err != nil {
		return err
	}
	links := normLinks(ch, pol.LinkedChannels)
	has := slices.Contains(links, other)
	if on != has {
		if on {
			links = normLinks(ch, append(links, other))
		} else {
			links = slices.DeleteFunc(links, func(k core.ChannelKey) bool { return k == other })
		}
		pol.LinkedChannels = links
		sc, _ := core.ParseChannelKey(string(ch)) // checked by checkPair
		d, err := s.draft(by, sc, core.Meta{}, &core.PolicyChanged{Policy: pol})
		if err != nil {
			return err
		}
		if _, err := s.j.Append(ctx, d); err != nil {
			return fmt.Errorf("journal policy of %s: %w", ch, err)
		}
	}
	if err := s.ix.SetLinks(ctx, ch, links); err != nil {
		return fmt.Errorf("index links of %s (rebuild repairs it): %w", ch, err)
	}
	return nil
}

// currentPolicy folds ch's journal for its last policy.changed (the
// configured default when there is none). Linking is a rare admin act, so a
// full read is acceptable; recall never does this (it reads the index).
func (s *Service) currentPolicy(ctx context.Context, ch core.ChannelKey) (core.Policy, error) {
	pol := s.policy
	pol.LinkedChannels = slices.Clone(pol.LinkedChannels)
	err := readAll(ctx, s.j, ch, func(c core.Command) error {
		if c.Kind() != core.KindPolicyChanged || c.Redacted() {
			return nil
		}
		p, err := core.Decode[*core.PolicyChanged](c)
		if err != nil {
			return err
		}
		pol = p.Policy
		return nil
	})
	return pol, err
}

// normLinks sorts and dedupes links, dropping ch itself.
func normLinks(ch core.ChannelKey, links []core.ChannelKey) []core.ChannelKey {
	out := slices.DeleteFunc(slices.Clone(links), func(k core.ChannelKey) bool { return k == ch || k == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// readAll calls fn for every command of ch, in seq order, a page at a time.
func readAll(ctx context.Context, j core.Journal, ch core.ChannelKey, fn func(core.Command) error) error {
	const page = 4096
	for from := uint64(1); ; {
		cmds, err := j.Read(ctx, ch, from, page)
		if err != nil {
			return fmt.Errorf("read %s from seq %d: %w", ch, from, err)
		}
		for _, c := range cmds {
			if err := fn(c); err != nil {
				return fmt.Errorf("%s seq %d: %w", ch, c.Seq(), err)
			}
		}
		if len(cmds) < page {
			return nil
		}
		from = cmds[len(cmds)-1].Seq() + 1
	}
}
