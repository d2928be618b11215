package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// Bounds. The inbox lists a person's open reports of the last
// reportHorizon, at most maxInboxReports of them (the newest: an owner
// whose routines misbehave all week sees the latest reports, not a wall).
// A report older than that still exists in the journal and its card can
// still be dismissed; it is just no longer listed (the fold keeps the
// latest 200 and the ids of all).
const (
	reportHorizon   = 7 * 24 * time.Hour
	maxInboxReports = 50
	maxReportBody   = 2000
	maxReportFields = 12
)

// Routine reports (ARCHITECTURE.md sections 6 and 8: what a routine's
// owner must hear of — a skipped slot, a post that never arrived, drift —
// goes to their DM inbox). A report is journaled in the routine's channel
// (report.filed, keyed by the notice's key, so a retry, a restart or a
// second replica files it once) before its card is posted in the owner's
// DM. It is an item of the owner's inbox (`inbox`, App Home) until they
// click Dismiss on the card (report.dismissed), which edits the card in
// place. The report, not the card, is the truth: a card that failed to
// post leaves the report listed, and the scheduler's next pass posts it.

// actionDismissReport is the Dismiss button's token action: distinct from
// the approval actions ('a', 'd', 'A', '0'..'9') and the proposal actions
// ('R', 'X'), so deliverClick hands it here first.
const actionDismissReport = 'D'

// reportCard renders r's DM card: a pure function of the fold, so a
// re-render carries the same token. A dismissed report's card says who
// dismissed it and when, without the button.
func reportCard(key []byte, r *fold.Report) (*core.Card, error) {
	c := &core.Card{ID: r.ID, Title: r.Title, Body: r.Body,
		Fields: append([]core.CardField{{Label: "Where", Value: channelRef(r.Where)}}, r.Fields...)}
	if r.Dismissed {
		c.Resolution = "🗑️ Dismissed by " + core.MentionOf(r.By.ID) + " at " + r.At.UTC().Format("2006-01-02 15:04 UTC")
		return c, nil
	}
	tok, err := cardToken(key, r.CmdID, actionDismissReport)
	if err != nil {
		return nil, err
	}
	c.Fields = append(c.Fields, core.CardField{Label: "Inbox", Value: "Listed by `inbox` until you dismiss it (for at most 7 days)."})
	c.Actions = []core.CardAction{{ID: "dismiss", Label: "Dismiss", Token: tok}}
	return c, nil
}

// NotifyOwner files n as a report in the routine's channel and posts its
// card in the owner's DM, each once per key: the report's id is keyed by
// n.Key, and the DM's journal is read before posting, so a retry, a restart
// or another replica neither files nor posts it twice. A report whose card
// could not be posted is in the owner's inbox all the same; the error tells
// the caller (the scheduler) to try the card again on its next pass.
func (e *Engine) NotifyOwner(ctx context.Context, n core.OwnerNotice) error {
	if n.Owner == "" || n.Key == "" {
		return errors.New("notify owner: owner and key are required")
	}
	if err := n.Where.Validate(); err != nil {
		return fmt.Errorf("notify owner: %w", err)
	}
	s, err := e.surface(n.Where.Platform)
	if err != nil {
		return fmt.Errorf("notify owner: %w", err)
	}
	rep, fresh, err := e.fileReport(ctx, n)
	if err != nil {
		return fmt.Errorf("notify owner %s: %w", n.Owner, err)
	}
	if fresh {
		defer e.refreshHome(ctx, n.Where.Platform, n.Owner)
	}
	if rep == nil || rep.Dismissed {
		return nil // long past (out of the fold) or dismissed: no card to show
	}
	dm, err := s.OpenDM(ctx, n.Owner)
	if err != nil {
		return fmt.Errorf("notify owner %s: open DM: %w", n.Owner, err)
	}
	posted, _, err := e.reportRendering(ctx, dm, n.Key)
	if err != nil || posted != nil {
		return err
	}
	card, err := reportCard(e.cfg.CardKey, rep)
	if err != nil {
		return fmt.Errorf("notify owner %s: %w", n.Owner, err)
	}
	out := core.Outbound{Key: n.Key, Scope: dm, Text: n.Title, Card: card, Priority: core.PriorityNormal, Resumed: true}
	if _, err := e.post(ctx, s, nil, out, postRecord{cause: rep.CmdID, role: core.RoleInbox}); err != nil {
		return fmt.Errorf("notify owner %s: %w", n.Owner, err)
	}
	return nil
}

// fileReport journals n's report.filed in the routine's channel unless it
// is there already, and returns the report as folded (nil: filed so long
// ago that the fold no longer holds it). fresh says this call filed it.
// Like the scheduler's own appends, it needs no lease: the append is made
// at the head the view folded, and the keyed id makes a second filing, by
// any replica, impossible.
func (e *Engine) fileReport(ctx context.Context, n core.OwnerNotice) (*fold.Report, bool, error) {
	v, err := e.channel(ctx, n.Where.Key())
	if err != nil {
		return nil, false, fmt.Errorf("file report %s: %w", n.Key, err)
	}
	fields := n.Fields
	if len(fields) > maxReportFields {
		fields = fields[:maxReportFields]
	}
	p := &core.ReportFiled{ReportID: n.Key, Owner: n.Owner, Title: core.Truncate(n.Title, 300), Body: core.Truncate(n.Body, maxReportBody),
		Fields: fields, Cause: n.Cause}
	// The id's time comes from the cause (a ULID) so every drafter of this
	// key mints the same id, whenever it drafts it.
	at := idTime(n.Cause, time.Unix(0, 0))
	cmds, err := v.appendPlan(ctx, func() ([]core.Draft, error) {
		if v.fold.ReportKnown(n.Key) {
			return nil, nil
		}
		d, err := e.b.SystemKeyed("scheduler", "report.filed:"+n.Key, at, n.Where, core.Meta{Cause: n.Cause}, p)
		if err != nil {
			return nil, err
		}
		return []core.Draft{d}, nil
	})
	if err != nil {
		// Another replica journaled the same keyed id first (the journal's
		// UNIQUE (id) refused this one): that is the one report.
		known := false
		_ = v.caughtUp(ctx, func() { known = v.fold.ReportKnown(n.Key) })
		if !known {
			return nil, false, fmt.Errorf("file report %s: %w", n.Key, err)
		}
		cmds = nil
	}
	var rep *fold.Report
	_ = v.with(ctx, func() {
		if r := v.fold.Report(n.Key); r != nil {
			cp := *r
			rep = &cp
		}
	})
	if len(cmds) > 0 {
		e.log.InfoContext(ctx, "routine report filed", "report", n.Key, "channel", string(v.key), "owner", n.Owner)
	}
	return rep, len(cmds) > 0, nil
}

// reportRendering reads dm's journal for report id's card: the message it
// was posted as (nil: not posted) and whether an edit of it is journaled.
func (e *Engine) reportRendering(ctx context.Context, dm core.Scope, id string) (*core.MessageRef, bool, error) {
	cmds, err := e.j.Read(ctx, dm.Key(), 0, 0)
	if err != nil {
		return nil, false, fmt.Errorf("read DM %s: %w", dm.Key(), err)
	}
	var ref *core.MessageRef
	updated := false
	for _, c := range cmds {
		if c.Redacted() {
			continue
		}
		switch c.Kind() {
		case core.KindMessagePosted:
			if p, err := core.Decode[*core.MessagePosted](c); err == nil && p.EffectID == id && ref == nil {
				ref = &core.MessageRef{Scope: c.Scope(), ID: p.MessageID, At: c.At()}
			}
		case core.KindMessageUpdated:
			if p, err := core.Decode[*core.MessageUpdated](c); err == nil && p.EffectID == id {
				updated = true
			}
		}
	}
	return ref, updated, nil
}

// refreshHome republishes user's home page; a failure is logged only.
func (e *Engine) refreshHome(ctx context.Context, platform, user string) {
	if err := e.PublishHome(ctx, platform, user); err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "could not refresh a home page", "user", user, "error", err)
	}
}

// reportItems lists user's open reports in v filed within the horizon
// before now. Callers hold v.mu.
func reportItems(v *chanView, user string, now time.Time) []core.InboxItem {
	var out []core.InboxItem
	for _, r := range v.fold.Reports() {
		if r.Owner != user || r.Dismissed || now.Sub(r.FiledAt) >= reportHorizon {
			continue
		}
		out = append(out, core.InboxItem{ID: r.ID, Kind: "report", Where: r.Where, Title: r.Title, Summary: core.Truncate(r.Body, 300),
			RequestedAt: r.FiledAt, ExpiresAt: r.FiledAt.Add(reportHorizon)})
	}
	return out
}

// newestReports keeps the newest maxInboxReports of items.
func newestReports(items []core.InboxItem) []core.InboxItem {
	if len(items) <= maxInboxReports {
		return items
	}
	slices.SortFunc(items, func(a, b core.InboxItem) int {
		if c := b.RequestedAt.Compare(a.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return items[:maxInboxReports]
}

// reportShow is the mailbox job that shows a dismissal: the DM card edited
// in place and the owner's home page republished. repair is set for a
// refused second dismissal: it edits only a card whose edit is missing (a
// crash between the dismissal and the edit) and otherwise changes nothing.
type reportShow struct {
	ch     core.ChannelKey
	id     string
	repair bool
}

// deliverReportClick dismisses the report whose report.filed command is
// filedID. Only the report's owner may; anyone else's click, and a second
// dismissal, change nothing and are answered to the clicker alone.
func (e *Engine) deliverReportClick(ctx context.Context, click core.CardClick, filedID string) error {
	tell := func(key, text string) {
		if click.Scope.Validate() == nil && click.By.ID != "" {
			e.enqueue(threadKey{click.Scope.Key(), click.Scope.Thread}, job{notice: &notice{key: key, scope: click.Scope, text: text, to: click.By.ID}})
		}
	}
	if click.By.ID == "" || click.By.IsBot {
		e.log.WarnContext(ctx, "report click refused: not a person", "report", filedID)
		return nil
	}
	v, rid, err := e.findReport(ctx, click.Scope.Platform, filedID)
	if err != nil {
		return fmt.Errorf("deliver report click: %w", err)
	}
	if v == nil {
		e.log.WarnContext(ctx, "report click refused: unknown report", "report", filedID, "by", click.By.ID)
		tell("report-unknown"+filedID+click.By.ID, "⚠️ I can't find the report behind that button (it may be too old), so nothing was done.")
		return nil
	}
	var refusal string
	var repair bool
	_, err = v.appendPlan(ctx, func() ([]core.Draft, error) {
		refusal, repair = "", false
		r := v.fold.Report(rid)
		if r == nil {
			refusal = "⚠️ I can't find the report behind that button (it may be too old), so nothing was done."
			return nil, nil
		}
		clicked, err := e.b.Human(click.By, r.Where, core.Meta{Cause: r.CmdID},
			&core.CardClicked{Card: r.ID, Action: string(actionDismissReport), Token: click.Token, By: click.By})
		if err != nil {
			return nil, err
		}
		switch {
		case click.By.ID != r.Owner:
			refusal = fmt.Sprintf("🚫 Not accepted: only %s, whose routine this report is about, can dismiss it. It stays in their inbox; nothing was done.",
				core.MentionOf(r.Owner))
		case r.Dismissed:
			refusal = fmt.Sprintf("This report was already dismissed by %s at %s. Nothing more was done.",
				core.MentionOf(r.By.ID), r.At.UTC().Format("2006-01-02 15:04 UTC"))
			repair = true
		}
		if refusal != "" {
			return []core.Draft{clicked}, nil
		}
		d, err := e.b.Human(click.By, r.Where, core.Meta{Cause: clicked.ID()}, &core.ReportDismissed{ReportID: r.ID, By: click.By})
		if err != nil {
			return nil, err
		}
		return []core.Draft{clicked, d}, nil
	})
	if err != nil {
		return fmt.Errorf("deliver report click on %s: %w", rid, err)
	}
	if refusal != "" {
		tell("report-refused"+filedID+click.By.ID, refusal)
	}
	if refusal == "" || repair {
		// Shown off the click's path (the platform waits for its ack), by
		// whichever replica took the click: the DM is no channel's run.
		e.enqueue(threadKey{v.key, "report:" + rid}, job{report: &reportShow{ch: v.key, id: rid, repair: repair}})
	}
	e.log.InfoContext(ctx, "report click", "report", rid, "by", click.By.ID, "refused", refusal != "")
	return nil
}

// findReport finds the channel of platform holding the report filed by
// command filedID, folding what other replicas appended since.
func (e *Engine) findReport(ctx context.Context, platform, filedID string) (*chanView, string, error) {
	chs, err := e.j.Channels(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("find report %s: %w", filedID, err)
	}
	for _, ch := range chs {
		if platform != "" && !strings.HasPrefix(string(ch), platform+"/") {
			continue
		}
		v, err := e.channel(ctx, ch)
		if err != nil {
			return nil, "", err
		}
		var rid string
		err = v.with(ctx, func() {
			if rid = v.fold.ReportFiledAs(filedID); rid == "" {
				if err := v.catchUp(ctx); err != nil {
					e.log.Warn("catch up channel for a report click", "channel", string(ch), "error", err)
				}
				rid = v.fold.ReportFiledAs(filedID)
			}
		})
		if err != nil {
			return nil, "", err
		}
		if rid != "" {
			return v, rid, nil
		}
	}
	return nil, "", nil
}

// showReport performs a reportShow job.
func (e *Engine) showReport(ctx context.Context, j *reportShow) error {
	v, err := e.channel(ctx, j.ch)
	if err != nil {
		return fmt.Errorf("show report %s: %w", j.id, err)
	}
	var rep *fold.Report
	_ = v.with(ctx, func() {
		if r := v.fold.Report(j.id); r != nil {
			cp := *r
			rep = &cp
		}
	})
	if rep == nil || !rep.Dismissed {
		return nil
	}
	s, err := e.surface(rep.Where.Platform)
	if err != nil {
		return fmt.Errorf("show report %s: %w", j.id, err)
	}
	dm, err := s.OpenDM(ctx, rep.Owner)
	if err != nil {
		return fmt.Errorf("show report %s: open DM: %w", j.id, err)
	}
	ref, updated, err := e.reportRendering(ctx, dm, rep.ID)
	if err != nil {
		return fmt.Errorf("show report %s: %w", j.id, err)
	}
	edited := false
	if ref != nil && !updated {
		if err := e.editReportCard(ctx, s, rep, *ref); err != nil {
			return err
		}
		edited = true
	}
	if !j.repair || edited {
		e.refreshHome(ctx, rep.Where.Platform, rep.Owner)
	}
	return nil
}

// editReportCard journals the edit of a dismissed report's card in the
// DM's journal, then performs it keyed by the edit's own effect id.
func (e *Engine) editReportCard(ctx context.Context, s core.Surface, rep *fold.Report, ref core.MessageRef) error {
	card, err := reportCard(e.cfg.CardKey, rep)
	if err != nil {
		return err
	}
	d, err := e.b.System("engine", ref.Scope, core.Meta{Cause: rep.DismissCmd},
		&core.MessageUpdated{EffectID: rep.ID, MessageID: ref.ID, Text: core.Truncate(card.Resolution, maxPostedText)})
	if err != nil {
		return fmt.Errorf("edit report card %s: %w", rep.ID, err)
	}
	dv, err := e.channel(ctx, ref.Scope.Key())
	if err != nil {
		return fmt.Errorf("edit report card %s: %w", rep.ID, err)
	}
	cmds, err := dv.append(ctx, nil, d)
	if err != nil {
		return fmt.Errorf("edit report card %s: %w", rep.ID, err)
	}
	out := core.Outbound{Key: core.EffectID(ref.Scope.Key(), cmds[0].Seq(), 0), Scope: ref.Scope, Text: rep.Title, Card: card, Priority: core.PriorityNormal}
	if err := s.Update(ctx, ref, out); err != nil {
		return fmt.Errorf("edit report card %s: %w", rep.ID, err)
	}
	return nil
}
