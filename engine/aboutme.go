package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// `what do you know about me`: what the bot keeps about one person on one
// platform, folded from every channel's journal and memory (answered only
// in the person's DM, as the inbox is). It lists the memories they wrote
// (or a run wrote for them) or that mention them, the consents they
// granted, the routines they own, the pending approvals they requested or
// may decide, and the channels where their routed messages are kept
// (counts, oldest and newest dates; redacted ones are not counted).

// maxAboutMemories bounds the memories read per channel.
const maxAboutMemories = 500

type aboutChannel struct {
	sc                core.Scope
	memories          []core.MemoryInfo
	messages          int
	oldest, newest    time.Time
	grants, approvals []string
	routines          []string
	texts             []exportMessage // their kept messages, oldest first (export.go)
	exp               exportChannel   // the same, for the export's JSON
	// dmWith are the people who wrote in this channel as a DM: a DM is
	// its person's alone (aboutmereach.go).
	dmWith map[string]bool
	// withheld counts notes that mention the person in a room they cannot
	// read now, or in another person's DM: counted, never shown.
	withheld int
}

func (e *Engine) aboutMeText(ctx context.Context, platform string, p core.Person) (string, error) {
	chans, err := e.aboutMe(ctx, platform, p)
	if err != nil {
		return "", err
	}
	text := aboutText(chans)
	if e.cfg.Connections != nil {
		cs, err := e.cfg.Connections.List(ctx, platform, p.ID)
		if err != nil {
			return "", fmt.Errorf("list connections: %w", err)
		}
		if len(cs) > 0 {
			names := make([]string, 0, len(cs))
			for _, c := range cs {
				names = append(names, "`"+c.Server+"`")
			}
			text += "\n🔌 I act as you on " + strings.Join(names, ", ") + " (your sign-ins, sealed; `connections`, `disconnect <server>`)."
		}
	}
	return text, nil
}

// aboutMe gathers what `what do you know about me` lists, per channel,
// sorted by channel. Each channel's view is borrowed for its part and
// released (borrow.go).
func (e *Engine) aboutMe(ctx context.Context, platform string, p core.Person) ([]*aboutChannel, error) {
	chs, err := e.j.Channels(ctx)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	var chans []*aboutChannel
	now := e.now()
	for _, ch := range platformChannels(chs, platform) {
		ac := &aboutChannel{}
		if err := e.borrowing(ctx, ch, func(v *chanView) error {
			if err := v.caughtUp(ctx, func() { e.aboutFold(v, p, now, ac) }); err != nil {
				return err
			}
			return e.aboutJournal(ctx, v, p, ac)
		}); err != nil {
			return nil, err
		}
		chans = append(chans, ac)
	}
	slices.SortFunc(chans, func(a, b *aboutChannel) int { return strings.Compare(a.sc.Channel, b.sc.Channel) })
	return chans, nil
}

// aboutFold fills ac with what v's fold holds of p: grants, routines,
// pending approvals. Callers hold v.mu.
func (e *Engine) aboutFold(v *chanView, p core.Person, now time.Time, ac *aboutChannel) {
	ac.sc, _ = core.ParseChannelKey(string(v.key))
	pol := e.policyLocked(v)
	for _, g := range v.fold.Grants() {
		if g.Owner == p.ID && !v.fold.Revoked(g.ID) {
			ac.grants = append(ac.grants, fmt.Sprintf("`%s` %s", g.ID, toolDest(g.Tool, g.Destination)))
			ac.exp.Consents = append(ac.exp.Consents, exportConsent{ID: g.ID, Tool: g.Tool, Destination: g.Destination})
		}
	}
	for _, r := range v.fold.RoutinesByID() {
		if r.Owner == p.ID && !r.Deleted {
			ac.routines = append(ac.routines, fmt.Sprintf("`%s` %s", r.ID, core.Truncate(oneLine(r.Instruction), 120)))
			ac.exp.Routines = append(ac.exp.Routines, exportRoutine{ID: r.ID, Instruction: r.Instruction})
		}
	}
	for _, a := range v.fold.Approvals() {
		if !a.Pending() || !now.Before(a.ExpiresAt) {
			continue
		}
		switch {
		case a.Requester == p.ID:
			ac.approvals = append(ac.approvals, fmt.Sprintf("`%s` %s (you asked)", a.ID, a.Tool))
			ac.exp.Approvals = append(ac.exp.Approvals, exportApproval{ID: a.ID, Tool: a.Tool, You: "asked"})
		case e.waitsFor(a, pol, p.ID):
			ac.approvals = append(ac.approvals, fmt.Sprintf("`%s` %s (you may decide)", a.ID, a.Tool))
			ac.exp.Approvals = append(ac.exp.Approvals, exportApproval{ID: a.ID, Tool: a.Tool, You: "may decide"})
		}
	}
	slices.Sort(ac.grants)
	slices.Sort(ac.routines)
	slices.Sort(ac.approvals)
}

// aboutJournal fills ac with what v's channel keeps of p outside the fold:
// their messages (from the journal) and the memories by or about them.
func (e *Engine) aboutJournal(ctx context.Context, v *chanView, p core.Person, ac *aboutChannel) error {
	if err := e.countMessages(ctx, v.key, p.ID, ac); err != nil {
		return err
	}
	if e.cfg.Memory == nil {
		return nil
	}
	l, ok := e.cfg.Memory(v.key).(core.MemoryLister)
	if !ok {
		return nil
	}
	got, err := l.ListMemories(ctx, 0, maxAboutMemories)
	if err != nil {
		return fmt.Errorf("list memories of %s: %w", v.key, err)
	}
	if err := fillFor(ctx, v, got); err != nil {
		return err
	}
	e.keepVisibleNotes(ctx, ac, p.ID, got)
	return nil
}

// countMessages counts person's routed messages kept (not redacted) in ch.
func (e *Engine) countMessages(ctx context.Context, ch core.ChannelKey, person string, ac *aboutChannel) error {
	const page = 2048
	files := newExportFiles() // attachments_export.go
	for from := uint64(1); ; {
		cmds, err := e.j.Read(ctx, ch, from, page)
		if err != nil {
			return fmt.Errorf("read %s: %w", ch, err)
		}
		for _, c := range cmds {
			noteDM(ac, c)
			files.see(c, person, ac.texts)
			if c.Kind() != core.KindMessageReceived || c.Redacted() || c.Actor().ID != person {
				continue
			}
			if p, err := core.Decode[*core.MessageReceived](c); err == nil {
				ac.texts = append(ac.texts, exportMessage{ID: p.MessageID, At: c.At().UTC(), Text: p.Text, Thread: c.Scope().Thread})
			}
			ac.messages++
			if ac.oldest.IsZero() || c.At().Before(ac.oldest) {
				ac.oldest = c.At()
			}
			if c.At().After(ac.newest) {
				ac.newest = c.At()
			}
		}
		if len(cmds) < page {
			return nil
		}
		from = cmds[len(cmds)-1].Seq() + 1
	}
}

func aboutText(chans []*aboutChannel) string {
	var mem, msg, grants, routines, approvals []string
	withheld := 0
	for _, ac := range chans {
		withheld += ac.withheld
		where := channelRef(ac.sc)
		for _, m := range ac.memories {
			mem = append(mem, fmt.Sprintf("• %s `%s` %s", where, m.ID, core.Truncate(oneLine(m.Text), 200)))
		}
		if ac.messages > 0 {
			msg = append(msg, fmt.Sprintf("• %s: %d, from %s to %s", where, ac.messages,
				ac.oldest.UTC().Format("2006-01-02"), ac.newest.UTC().Format("2006-01-02")))
		}
		for _, g := range ac.grants {
			grants = append(grants, "• "+where+" "+g)
		}
		for _, r := range ac.routines {
			routines = append(routines, "• "+where+" "+r)
		}
		for _, a := range ac.approvals {
			approvals = append(approvals, "• "+where+" "+a)
		}
	}
	var b strings.Builder
	b.WriteString("🔎 What I keep about you:")
	section := func(title, none string, rows []string) {
		b.WriteString("\n\n*" + title + "*")
		if len(rows) == 0 {
			b.WriteString("\n" + none)
			return
		}
		for _, r := range rows {
			b.WriteString("\n" + r)
		}
	}
	if withheld > 0 {
		// Counted, never shown, and not said where: the rooms are not the
		// person's to read.
		mem = append(mem, fmt.Sprintf("• %d more that mention you, in rooms you cannot read now or in other people's DMs: not shown", withheld))
	}
	section("Memories you added or that mention you", "none", mem)
	section("Your messages I keep (in the journal)", "none", msg)
	section("Consents you granted", "none", grants)
	section("Routines you own", "none", routines)
	section("Pending approvals you asked for or may decide", "none", approvals)
	b.WriteString("\n\n`delete memory <id>` (in its channel) erases a memory and every copy of its text in that channel's journal.")
	return b.String()
}
