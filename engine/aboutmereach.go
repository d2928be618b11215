package engine

import (
	"context"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// The ledger's rule (docs/privacy.md): `what do you know about me` and
// `export my data` show a person their own notes (written by them, or by
// a run for them) wherever they are, and notes by others that mention
// them only from rooms they can read now (the reachability rule,
// core.CanReadNow) and never from another person's DM. Every other note
// that mentions them is counted, without its text, its author or its room.

// noteDM records who wrote in channel c's DM messages: a channel where
// people write as in a DM is theirs alone.
func noteDM(ac *aboutChannel, c core.Command) {
	if c.Kind() != core.KindMessageReceived || c.Redacted() {
		return
	}
	p, err := core.Decode[*core.MessageReceived](c)
	if err != nil || p.Visibility != core.DM || p.Author.ID == "" {
		return
	}
	if ac.dmWith == nil {
		ac.dmWith = map[string]bool{}
	}
	ac.dmWith[p.Author.ID] = true
}

// keepVisibleNotes keeps, of a channel's notes, those person may see in
// their ledger and counts the withheld ones.
func (e *Engine) keepVisibleNotes(ctx context.Context, ac *aboutChannel, person string, notes []core.MemoryInfo) {
	readable, asked := false, false
	for _, m := range notes {
		switch {
		case m.Author() == person:
			ac.memories = append(ac.memories, m)
		case !strings.Contains(m.Text, core.MentionOf(person)):
		default:
			if !asked {
				readable, asked = e.mayReadForLedger(ctx, ac, person), true
			}
			if readable {
				ac.memories = append(ac.memories, m)
			} else {
				ac.withheld++
			}
		}
	}
}

// mayReadForLedger is whether person may see others' notes of ac's room:
// a DM only if it is theirs; any other room if they can read it now, as
// the platform says. A failed check withholds.
func (e *Engine) mayReadForLedger(ctx context.Context, ac *aboutChannel, person string) bool {
	if len(ac.dmWith) > 0 {
		return len(ac.dmWith) == 1 && ac.dmWith[person]
	}
	s, err := e.surface(ac.sc.Platform)
	if err != nil {
		return false
	}
	ok, err := core.CanReadNow(ctx, s, ac.sc.Channel, person)
	if err != nil {
		e.log.WarnContext(ctx, "ledger: could not check that a person can read a room; its notes are withheld", "error", err)
		return false
	}
	return ok
}
