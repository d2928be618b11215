package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// `forget me` (docs/privacy.md): asked in the person's DM, it journals an
// erasure.requested there (ids only) and shows a confirmation card whose
// signed buttons name the request. Only the person who asked may click,
// once, before it expires (erasure.resolved records the click, atomically
// with the check). A confirmed request erases, in every channel of the
// platform: the memories the person wrote (memory Erase: their text from
// that channel's journal too), the texts of the messages they wrote (each
// message.received they authored, then every other erasable command that
// carries one of those texts; core.CarriesText), and their standing
// consents (consent.revoked). Every redaction is a signed command.redacted
// in the asker's name. An operator (MARLOWE_ADMINS) may ask the same for
// someone else with `forget <@user>`; it is journaled as theirs.

// Forget card actions: distinct from the approval, proposal and report
// actions, so deliverClick hands them here before looking for an approval.
const (
	actionForgetConfirm = 'F'
	actionForgetCancel  = 'f'
)

// forgetTTL is how long a forget card may be confirmed.
const forgetTTL = time.Hour

// minDerivedText is the shortest message text (normalized) searched for in
// other commands: shorter ones ("ok", "hi") would match unrelated commands;
// the message itself is erased all the same.
const minDerivedText = 8

func isForgetAction(a byte) bool { return a == actionForgetConfirm || a == actionForgetCancel }

// isOperator reports whether id administers every channel of platform
// (MARLOWE_ADMINS): who may forget someone else.
func (e *Engine) isOperator(platform, id string) bool {
	for _, op := range e.cfg.Operators {
		if op.Platform == platform && op.UserID == id {
			return true
		}
	}
	return false
}

// forgetCommand answers `forget me` / `forget <@user>` for h: a refusal, or
// the confirmation card in the DM.
func (d *driver) forgetCommand(ctx context.Context, h *humanMsg, target string) (core.Reply, error) {
	rs, e := d.rs, d.e
	reply := func(s string) core.Reply { return core.Reply{Text: s, Provider: "grammar"} }
	if target == "" || target == h.author.ID {
		target = h.author.ID
	} else if !e.isOperator(rs.Scope.Platform, h.author.ID) {
		return reply("🚫 Only an operator of this bot (MARLOWE_ADMINS) can erase someone else's data. Nothing was done; " +
			core.MentionOf(target) + " can say `forget me` to me in a direct message."), nil
	}
	if !h.dm {
		return reply("I do that only in a direct message: say `forget me` to me there. Nothing was done."), nil
	}
	sum := sha256.Sum256([]byte("forget\x00" + h.cmdID))
	id := "er" + hex.EncodeToString(sum[:12])
	req := &core.ErasureRequested{ErasureID: id, Person: target, ExpiresAt: e.now().Add(forgetTTL)}
	rd, err := e.b.Human(h.author, rs.Scope, core.Meta{Run: rs.ID, Cause: h.cmdID}, req)
	if err != nil {
		return core.Reply{}, err
	}
	if _, err := d.v.appendPlan(ctx, func() ([]core.Draft, error) {
		if d.v.fold.Erasure(id) != nil {
			return nil, nil // re-executed after a crash: journaled already
		}
		return []core.Draft{rd}, nil
	}); err != nil {
		return core.Reply{}, err
	}
	var er *fold.Erasure
	_ = d.v.with(ctx, func() { er = d.v.fold.Erasure(id) })
	if er == nil {
		return core.Reply{}, fmt.Errorf("forget: request %s not folded", id)
	}
	card, err := forgetCard(e.cfg.CardKey, er)
	if err != nil {
		return core.Reply{}, err
	}
	out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), h.seq, 1), Scope: rs.Scope, Text: card.Title, Card: card, Priority: core.PriorityHigh}
	if _, err := e.post(ctx, d.s, rs, out, postRecord{run: rs.ID, cause: h.cmdID, role: core.RoleCard}); err != nil {
		return core.Reply{}, err
	}
	return reply("Nothing is erased until you click Erase on the card."), nil
}

// forgetCard renders the confirmation card of er.
func forgetCard(key []byte, er *fold.Erasure) (*core.Card, error) {
	confirm, err := cardToken(key, er.ID, actionForgetConfirm)
	if err != nil {
		return nil, err
	}
	cancel, err := cardToken(key, er.ID, actionForgetCancel)
	if err != nil {
		return nil, err
	}
	whose, who := "your", "you"
	if er.Person != er.By.ID {
		whose, who = core.MentionOf(er.Person)+"'s", core.MentionOf(er.Person)
	}
	return &core.Card{
		ID:    "forget-" + er.ID,
		Title: "🧹 Erase " + whose + " messages and notes everywhere?",
		Fields: []core.CardField{
			{Label: "Erases", Value: "in every channel I am in: the text of every message " + who + " wrote to me, every model step, tool call, tool result and post of mine that carries it, and the notes " + who + " added; " + whose + " standing consents are revoked"},
			{Label: "Keeps", Value: "a signed redaction marker for each erased record (ids, no text), approval and consent decisions (who decided what; text quoting " + who + " is removed from them), and messages on the chat platform itself"},
			{Label: "Deadline", Value: er.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") + "; only " + core.MentionOf(er.By.ID) + " can confirm"},
		},
		Actions: []core.CardAction{
			{ID: "erase", Label: "Erase", Token: confirm, Style: "danger"},
			{ID: "cancel", Label: "Cancel", Token: cancel},
		},
	}, nil
}

// deliverForgetClick resolves the forget request a verified token names,
// then erases on a confirmation. Only the person who asked may click; a
// click on a resolved or expired request changes nothing. Refusals go to
// the clicker alone.
func (e *Engine) deliverForgetClick(ctx context.Context, click core.CardClick, id string, action byte) error {
	tell := func(key, text string, private bool) {
		if click.Scope.Validate() != nil {
			return
		}
		n := &notice{key: key, scope: click.Scope, text: text}
		if private {
			n.to = click.By.ID
		}
		e.enqueue(threadKey{click.Scope.Key(), click.Scope.Thread}, job{notice: n})
	}
	h := sha256.Sum256([]byte(click.Token + "\x00" + click.By.ID + "\x00" + click.At.String()))
	nk := "forget" + hex.EncodeToString(h[:10])
	if click.Scope.Validate() != nil {
		return nil
	}
	v, err := e.channel(ctx, click.Scope.Key())
	if err != nil {
		return fmt.Errorf("deliver forget click: %w", err)
	}
	var er *fold.Erasure
	refusal, repaint := "", false
	now := e.now()
	var jobScope core.Scope // the erasure job's run scope, once confirmed
	var jobRun string
	_, err = v.appendPlan(ctx, func() ([]core.Draft, error) {
		refusal, repaint, er, jobRun = "", false, v.fold.Erasure(id), ""
		if er == nil {
			refusal = "⚠️ I can't find the request behind that button here, so nothing was done."
			return nil, nil
		}
		clicked, err := e.b.Human(click.By, click.Scope, core.Meta{Cause: er.CmdID},
			&core.CardClicked{Card: "forget-" + id, Action: string(action), Token: click.Token, By: click.By})
		if err != nil {
			return nil, err
		}
		res := &core.ErasureResolved{ErasureID: id, By: click.By}
		switch {
		case click.By.ID == "" || click.By.IsBot || click.By.ID != er.By.ID:
			refusal = "🚫 Only " + core.MentionOf(er.By.ID) + ", who asked, can confirm this. Nothing was done."
			return []core.Draft{clicked}, nil
		case !er.Pending():
			refusal = "This request was already " + er.Decision + ". Nothing more was done."
			repaint = true // a page that still shows the buttons
			return []core.Draft{clicked}, nil
		case !now.Before(er.ExpiresAt):
			res.Decision, refusal = "expired", "⌛ This request expired, so nothing was erased. Say `forget me` again for a new card."
		case action == actionForgetCancel:
			res.Decision, refusal = "cancelled", "Cancelled: nothing was erased."
		default:
			res.Decision = "confirmed"
		}
		rd, err := e.b.Human(click.By, click.Scope, core.Meta{Cause: clicked.ID()}, res)
		if err != nil {
			return nil, err
		}
		er.Decision = res.Decision
		if res.Decision != "confirmed" {
			return []core.Draft{clicked, rd}, nil
		}
		// The erasure itself is a job of its own (erasejob.go), journaled
		// with the confirmation: a run the channel's owner drives, resumed
		// after a restart, never inside this delivery.
		jobScope = erasureJobScope(click.Scope, id)
		jobRun = e.b.NewID()
		sd, err := e.b.Agent(jobRun, jobScope, core.Meta{Cause: rd.ID()}, &core.RunStarted{Trigger: erasureTrigger + id})
		if err != nil {
			return nil, err
		}
		return []core.Draft{clicked, rd, sd}, nil
	})
	if err != nil {
		return fmt.Errorf("deliver forget click on %s: %w", id, err)
	}
	if er != nil && er.Decision != "" {
		e.showForgetDecision(ctx, v, click.Scope, id)
	}
	if refusal != "" {
		e.log.InfoContext(ctx, "forget click not acted on", "erasure", id, "by", click.By.ID, "why", refusal)
		// A decided card says so itself: the answer to a click is the
		// clicker's alone, as every refusal is.
		tell(nk, refusal, er == nil || repaint || er.Decision != "cancelled" && er.Decision != "expired")
		return nil
	}
	e.log.InfoContext(ctx, "erasure confirmed: job started", "erasure", id, "by", click.By.ID, "run", jobRun)
	tell(nk, "🧹 Confirmed. I am erasing in the background and will say here how far I got, and when it is done.", false)
	e.enqueue(threadKey{jobScope.Key(), jobScope.Thread}, job{run: jobRun})
	return nil
}

// showForgetDecision edits the forget card of request id in place, as an
// approval card is once decided: the decision, and no buttons. The edit is
// journaled (message.updated, keyed by the card's effect), so a reload
// shows the decided card; a failure is logged only, and the next click on
// the stale card repaints it.
func (e *Engine) showForgetDecision(ctx context.Context, v *chanView, sc core.Scope, id string) {
	var er *fold.Erasure
	_ = v.with(ctx, func() { er = v.fold.Erasure(id) })
	if er == nil || er.Pending() {
		return
	}
	if err := e.editForgetCard(ctx, sc, er); err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "could not show the forget card's decision", "erasure", id, "error", err)
	}
}

func (e *Engine) editForgetCard(ctx context.Context, sc core.Scope, er *fold.Erasure) error {
	cmds, err := e.j.Read(ctx, sc.Key(), 0, 0)
	if err != nil {
		return fmt.Errorf("read %s: %w", sc.Key(), err)
	}
	// The card is the first card posted for the message that asked (the
	// request's cause).
	cause := ""
	var ref *core.MessageRef
	effect := ""
	for _, c := range cmds {
		switch {
		case c.ID() == er.CmdID:
			cause = c.Cause()
		case cause != "" && ref == nil && c.Kind() == core.KindMessagePosted && c.Cause() == cause:
			if p, err := core.Decode[*core.MessagePosted](c); err == nil && p.Role == core.RoleCard {
				ref, effect = &core.MessageRef{Scope: c.Scope(), ID: p.MessageID, At: c.At()}, p.EffectID
			}
		}
	}
	if ref == nil {
		return nil // never posted (or erased): nothing shows buttons
	}
	s, err := e.surface(sc.Platform)
	if err != nil {
		return err
	}
	card, err := forgetCard(e.cfg.CardKey, er)
	if err != nil {
		return err
	}
	card.Actions = nil
	card.Fields = card.Fields[:len(card.Fields)-1] // the deadline is past use
	switch er.Decision {
	case "confirmed":
		card.Resolution = "✅ Erase confirmed by " + core.MentionOf(er.DecidedBy.ID)
	case "cancelled":
		card.Resolution = "Cancelled by " + core.MentionOf(er.DecidedBy.ID) + ": nothing was erased"
	default:
		card.Resolution = "⌛ Expired: nothing was erased"
	}
	if !er.DecidedAt.IsZero() {
		card.Resolution += " at " + er.DecidedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	card.Resolution += "."
	d, err := e.b.System("engine", ref.Scope, core.Meta{Cause: er.CmdID},
		&core.MessageUpdated{EffectID: effect, MessageID: ref.ID, Text: core.Truncate(card.Resolution, maxPostedText)})
	if err != nil {
		return err
	}
	v, err := e.channel(ctx, ref.Scope.Key())
	if err != nil {
		return err
	}
	appended, err := v.append(ctx, nil, d)
	if err != nil {
		return err
	}
	out := core.Outbound{Key: core.EffectID(ref.Scope.Key(), appended[0].Seq(), 0), Scope: ref.Scope,
		Text: card.Title + "\n" + card.Resolution, Card: card, Priority: core.PriorityHigh}
	return s.Update(ctx, *ref, out)
}

// personChannel is what a person's erasure did in one channel.
type personChannel struct {
	sc       core.Scope
	erasure  core.Erasure
	memories int // memories of theirs erased
	consents int // consents revoked
	others   int // messages by other people that still quote a text of theirs
	mention  int // other people's memories that mention them (kept)
}

type personErasure struct {
	channels    []*personChannel
	connections int // sign-ins revoked (connections.go)
}

// erasePerson erases person's texts, memories and consents in every channel
// of platform, in by's name, telling progress how far it got. It runs as
// the erasure job (erasejob.go) and may be stopped anywhere and run again:
// every step skips what is erased already. So that a second run still
// knows every text, copies are erased first, in every channel, and the
// person's own messages (the texts' source) only after that.
func (e *Engine) erasePerson(ctx context.Context, platform, person string, by core.Person, reason string, progress func(done, total int)) (personErasure, error) {
	var out personErasure
	// Their sign-ins first: revoked at each server and deleted here.
	if e.cfg.Connections != nil {
		n, err := e.cfg.Connections.DisconnectAll(ctx, platform, person, by.ID)
		out.connections = n
		if err != nil {
			return out, fmt.Errorf("disconnect %s's connections: %w", person, err)
		}
	}
	if err := e.deleteExportsOf(ctx, platform, person); err != nil {
		return out, err
	}
	all, err := e.j.Channels(ctx)
	if err != nil {
		return out, fmt.Errorf("list channels: %w", err)
	}
	var chs []core.ChannelKey
	for _, ch := range all {
		if strings.HasPrefix(string(ch), platform+"/") {
			chs = append(chs, ch)
		}
	}
	actor := core.Actor{Type: core.ActorHuman, ID: by.ID, Platform: platform}
	// Their texts, from every channel (a copy may be anywhere), indexed once
	// (core.TextMatcher), and where their own messages are: from the
	// journal's author index, not by reading every channel.
	texts := core.NewTextMatcher()
	own, err := e.messagesOf(ctx, platform, person, texts)
	if err != nil {
		return out, err
	}
	// A platform whose messages the bot keeps (the sandbox) erases its
	// copies first, while every text is still known to a resumed job.
	if err := e.eraseOnPlatform(ctx, platform, "", person, texts); err != nil {
		return out, err
	}
	// Where consents may be (their grants are revoked on a fresh fold).
	itemList, err := e.j.ItemChannels(ctx, platform)
	if err != nil {
		return out, fmt.Errorf("list item channels: %w", err)
	}
	items := make(map[core.ChannelKey]bool, len(itemList))
	for _, ch := range itemList {
		items[ch] = true
	}
	pcs := make(map[core.ChannelKey]*personChannel, len(chs))
	total := 2 * len(chs)
	for i, ch := range chs {
		sc, err := core.ParseChannelKey(string(ch))
		if err != nil {
			return out, err
		}
		pc := &personChannel{sc: sc}
		pcs[ch] = pc
		if err := e.eraseCopiesOf(ctx, sc, own[ch], texts, by, reason, pc); err != nil {
			return out, err
		}
		progress(i+1, total)
	}
	for i, ch := range chs {
		if err := e.eraseOwnIn(ctx, ch, own[ch].messages(), person, actor, by, reason, pcs[ch], items[ch]); err != nil {
			return out, err
		}
		if pc := pcs[ch]; pc.erasure.RemovedTotal() > 0 || pc.memories > 0 || pc.consents > 0 || pc.others > 0 || pc.mention > 0 || len(pc.erasure.Kept) > 0 || len(pc.erasure.Restated) > 0 {
			out.channels = append(out.channels, pc)
		}
		progress(len(chs)+i+1, total)
	}
	slices.SortFunc(out.channels, func(a, b *personChannel) int { return strings.Compare(a.sc.Channel, b.sc.Channel) })
	return out, nil
}

// eraseOnPlatform asks platform's surface, when it keeps its messages
// itself (core.PlatformEraser: the sandbox), to erase person's messages
// (none when person is "") and the copies of texts there, in channel
// ("": everywhere).
func (e *Engine) eraseOnPlatform(ctx context.Context, platform, channel, person string, texts *core.TextMatcher) error {
	s, err := e.surface(platform)
	if err != nil {
		return nil // no surface: nothing kept there
	}
	pe, ok := s.(core.PlatformEraser)
	if !ok {
		return nil
	}
	n, err := pe.EraseTexts(ctx, channel, person, texts)
	if err != nil {
		return fmt.Errorf("erase the copies on %s: %w", platform, err)
	}
	e.log.InfoContext(ctx, "erased the platform's copies", "platform", platform, "messages", n)
	return nil
}

// eraseOwnIn erases, in ch, person's memories and own messages (mine) and
// revokes their consents. The channel's view is borrowed and released
// (borrow.go), so an erasure does not leave every channel of the
// installation in memory. A view that is not loaded is not borrowed at all
// when the channel has no memories and no consent (grants false: not among
// the journal's item channels): its own messages are redacted in the
// journal, and whoever folds the channel later folds that.
func (e *Engine) eraseOwnIn(ctx context.Context, ch core.ChannelKey, mine []cmdRef, person string, actor core.Actor, by core.Person, reason string, pc *personChannel, grants bool) error {
	if !grants && !e.viewLoaded(ch) {
		has, err := e.hasMemories(ctx, ch)
		if err != nil {
			return err
		}
		if !has {
			return e.redactAll(ctx, pc.sc, mine, by, reason, pc)
		}
	}
	v, release := e.borrow(ch)
	defer release()
	if err := e.eraseMemoriesOf(ctx, v, person, actor, reason, pc); err != nil {
		return err
	}
	if err := e.redactAll(ctx, pc.sc, mine, by, reason, pc); err != nil {
		return err
	}
	// The fold drops the turns it copied from what was erased as it folds
	// the redactions (every replica's does, at its next catch-up): catch
	// this one up, then revoke on the fresh state.
	if err := v.withFresh(ctx, 0, func() {}); err != nil {
		return fmt.Errorf("catch up %s: %w", ch, err)
	}
	return e.revokeConsentsOf(ctx, v, pc.sc, person, by, pc)
}

// redactAll redacts targets of sc's channel eraseBatch at a time.
func (e *Engine) redactAll(ctx context.Context, sc core.Scope, targets []cmdRef, by core.Person, reason string, pc *personChannel) error {
	for len(targets) > 0 {
		n := min(len(targets), eraseBatch)
		if err := e.redactFor(ctx, sc, targets[:n], by, reason, pc); err != nil {
			return err
		}
		targets = targets[n:]
	}
	return nil
}

// hasMemories reports whether ch's memory may hold a note (one that cannot
// be listed is assumed to).
func (e *Engine) hasMemories(ctx context.Context, ch core.ChannelKey) (bool, error) {
	if e.cfg.Memory == nil {
		return false, nil
	}
	l, ok := e.cfg.Memory(ch).(core.MemoryLister)
	if !ok {
		return true, nil
	}
	got, err := l.ListMemories(ctx, 0, 1)
	if err != nil {
		return false, fmt.Errorf("list memories of %s: %w", ch, err)
	}
	return len(got) > 0, nil
}

// eraseMemoriesOf erases the live memories person added (or a run added
// for them) in v's channel, each with its text in the channel's journal.
func (e *Engine) eraseMemoriesOf(ctx context.Context, v *chanView, person string, by core.Actor, reason string, pc *personChannel) error {
	if e.cfg.Memory == nil {
		return nil
	}
	mem := e.cfg.Memory(v.key)
	l, ok := mem.(core.MemoryLister)
	er, ok2 := mem.(core.MemoryEraser)
	if !ok || !ok2 {
		return nil
	}
	for {
		got, err := l.ListMemories(ctx, 0, maxAboutMemories)
		if err != nil {
			return fmt.Errorf("list memories of %s: %w", v.key, err)
		}
		if err := fillFor(ctx, v, got); err != nil {
			return err
		}
		erased := 0
		pc.mention = 0
		for _, m := range got {
			if m.Author() != person {
				if strings.Contains(m.Text, core.MentionOf(person)) {
					pc.mention++
				}
				continue
			}
			r, err := er.Erase(ctx, by, m.ID, reason)
			if err != nil {
				return fmt.Errorf("erase memory %s of %s: %w", m.ID, v.key, err)
			}
			mergeErasure(&pc.erasure, r)
			pc.memories++
			erased++
		}
		if erased == 0 || len(got) < maxAboutMemories {
			return nil
		}
	}
}

func mergeErasure(dst *core.Erasure, src core.Erasure) {
	for k, n := range src.Removed {
		if dst.Removed == nil {
			dst.Removed = map[string]int{}
		}
		dst.Removed[k] += n
	}
	dst.Markers += src.Markers
	for k, n := range src.Restated {
		if dst.Restated == nil {
			dst.Restated = map[string]int{}
		}
		dst.Restated[k] += n
	}
	for k, n := range src.Kept {
		if dst.Kept == nil {
			dst.Kept = map[string]int{}
		}
		dst.Kept[k] += n
	}
}

// ownIn is what a person's erasure knows of their messages in one channel
// before it reads that channel: the messages themselves (erased once
// their copies are), and their ids (their files records are theirs too).
type ownIn struct {
	refs  []cmdRef
	seqs  map[uint64]bool
	files *filesOfErased // attachments_erase.go
}

// messages returns the messages (none for a nil o: no message there).
func (o *ownIn) messages() []cmdRef {
	if o == nil {
		return nil
	}
	return o.refs
}

// messagesOf finds the messages person wrote in platform through the
// journal's author index (core.MessagesBy), adds to texts those long
// enough to look for elsewhere (mention stripped), and returns them by
// channel.
func (e *Engine) messagesOf(ctx context.Context, platform, person string, texts *core.TextMatcher) (map[core.ChannelKey]*ownIn, error) {
	msgs, err := core.MessagesBy(ctx, e.j, platform, person)
	if err != nil {
		return nil, fmt.Errorf("find %s's messages: %w", person, err)
	}
	own := map[core.ChannelKey]*ownIn{}
	for _, c := range msgs {
		p := ownMessage(c, person)
		if p == nil {
			continue
		}
		o := own[c.Channel()]
		if o == nil {
			o = &ownIn{seqs: map[uint64]bool{}, files: newFilesOfErased()}
			own[c.Channel()] = o
		}
		o.refs = append(o.refs, refOf(c))
		o.seqs[c.Seq()] = true
		o.files.erased(c)
		if t := chatcommand.StripLeadingMention(p.Text, p.Mentions); len(strings.Join(strings.Fields(t), " ")) >= minDerivedText {
			texts.Add(t)
		}
	}
	return own, nil
}

// ownMessage is c's message when c is a kept message.received by person.
func ownMessage(c core.Command, person string) *core.MessageReceived {
	if c.Kind() != core.KindMessageReceived || c.Redacted() {
		return nil
	}
	p, err := core.Decode[*core.MessageReceived](c)
	if err != nil || p.Author.ID != person {
		return nil
	}
	return p
}

// eraseBatch is how many redactions an erasure writes in one durable
// write (core.RedactAll): a batch costs about one commit, and a job
// stopped between two batches resumes after the last one.
const eraseBatch = 500

// redactFor redacts targets (of sc's channel) in by's name, in one write,
// counting them in pc; those redacted already (an earlier run of the job,
// or retention) are skipped.
func (e *Engine) redactFor(ctx context.Context, sc core.Scope, targets []cmdRef, by core.Person, reason string, pc *personChannel) error {
	if len(targets) == 0 {
		return nil
	}
	reds := make([]core.Redaction, len(targets))
	kinds := make(map[string]core.Kind, len(targets))
	for i, t := range targets {
		rd, err := e.b.Human(by, sc, core.Meta{Cause: t.id},
			&core.CommandRedacted{Seq: t.seq, ID: t.id, Reason: reason, TargetKind: t.kind.String()})
		if err != nil {
			return err
		}
		if err := e.dropFilesAt(ctx, sc.Key(), t.seq, t.kind); err != nil { // attachments_erase.go
			return err
		}
		reds[i] = core.Redaction{Seq: t.seq, Record: rd}
		kinds[rd.ID()] = t.kind
	}
	done, err := core.RedactAll(ctx, e.j, reds)
	for _, c := range done {
		pc.erasure.Add(kinds[c.ID()])
	}
	if err != nil {
		return fmt.Errorf("redact %d in %s: %w", len(reds), sc.Key(), err)
	}
	return nil
}

// cmdRef names a command to redact.
type cmdRef struct {
	seq  uint64
	id   string
	kind core.Kind
}

func refOf(c core.Command) cmdRef { return cmdRef{seq: c.Seq(), id: c.ID(), kind: c.Kind()} }

// eraseCopiesOf redacts, in sc's channel, every erasable command other
// than person's own messages (own) that carries one of texts (theirs, from
// every channel) or a piece of one, and the files records of their
// messages; other people's messages that quote one are kept (counted),
// decision records restated, the rest kept (Kept). Redactions are written
// eraseBatch at a time.
func (e *Engine) eraseCopiesOf(ctx context.Context, sc core.Scope, own *ownIn, texts *core.TextMatcher, by core.Person, reason string, pc *personChannel) error {
	ch := sc.Key()
	head, _, err := e.j.Head(ctx, ch)
	if err != nil {
		return err
	}
	if texts.Empty() && own == nil {
		return nil
	}
	files := newFilesOfErased()
	if own != nil {
		files = own.files
	}
	var batch []cmdRef
	flush := func() error {
		err := e.redactFor(ctx, sc, batch, by, reason, pc)
		batch = batch[:0]
		return err
	}
	err = readAll(ctx, e.j, ch, head, func(c core.Command) error {
		if c.Redacted() || (own != nil && own.seqs[c.Seq()]) {
			return nil
		}
		switch {
		case files.belongs(c):
			batch = append(batch, refOf(c))
		case !texts.Carries(c):
		case c.Kind() == core.KindMessageReceived:
			pc.others++ // someone else's message quoting them: theirs to erase
		case core.Erasable(c.Kind()):
			batch = append(batch, refOf(c))
		default:
			// decision records lose the text (restated); routines, policy
			// and other people's memories carrying their words are kept
			done, err := e.restate(ctx, sc, c, texts, by, reason)
			if err != nil {
				return err
			}
			if done {
				pc.erasure.Restate(c.Kind())
			} else {
				pc.erasure.Keep(c.Kind())
			}
		}
		if len(batch) >= eraseBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// restate replaces c, a decision record carrying one of texts, with its
// restatement without them (core.RestateIn): its ids and decision stay for
// the audit, the text goes.
func (e *Engine) restate(ctx context.Context, sc core.Scope, c core.Command, texts *core.TextMatcher, by core.Person, reason string) (bool, error) {
	return core.RestateIn(ctx, e.j, c, texts, func(restated string) (core.Draft, error) {
		return e.b.Human(by, sc, core.Meta{Cause: c.ID()}, &core.CommandRedacted{
			Seq: c.Seq(), ID: c.ID(), Reason: reason, TargetKind: c.Kind().String(), Restated: restated})
	})
}

// readAll calls fn on every command of ch up to head.
func readAll(ctx context.Context, j core.Journal, ch core.ChannelKey, head uint64, fn func(core.Command) error) error {
	const page = 1024
	for from := uint64(1); from <= head; {
		cmds, err := j.Read(ctx, ch, from, page)
		if err != nil {
			return fmt.Errorf("read %s: %w", ch, err)
		}
		for _, c := range cmds {
			if c.Seq() > head {
				return nil
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(cmds) < page {
			return nil
		}
		from = cmds[len(cmds)-1].Seq() + 1
	}
	return nil
}

// revokeConsentsOf revokes person's standing consents in v's channel.
func (e *Engine) revokeConsentsOf(ctx context.Context, v *chanView, sc core.Scope, person string, by core.Person, pc *personChannel) error {
	cmds, err := v.appendPlan(ctx, func() ([]core.Draft, error) {
		var drafts []core.Draft
		for _, g := range v.fold.Grants() {
			if g.Owner != person || v.fold.Revoked(g.ID) {
				continue
			}
			d, err := e.b.Human(by, sc, core.Meta{}, &core.ConsentRevoked{ConsentID: g.ID, Tool: g.Tool, Destination: g.Destination, Owner: g.Owner})
			if err != nil {
				return nil, err
			}
			drafts = append(drafts, d)
		}
		return drafts, nil
	})
	if err != nil && !errors.Is(err, errCheckFailed) {
		return fmt.Errorf("revoke consents in %s: %w", sc.Key(), err)
	}
	pc.consents += len(cmds)
	return nil
}

// text is the reply to a confirmed forget: what was removed, per channel
// and kind, and what remains.
func (pe personErasure) text(person, by, platform string) string {
	whose, who := "your", "you"
	if person != by {
		whose, who = core.MentionOf(person)+"'s", core.MentionOf(person)
	}
	var b strings.Builder
	if len(pe.channels) == 0 {
		fmt.Fprintf(&b, "🧹 I kept nothing of %s messages or notes: nothing was erased.", whose)
	} else {
		fmt.Fprintf(&b, "🧹 Erased %s messages and notes:", whose)
	}
	markers, kept, restated, others, mention := 0, map[string]int{}, map[string]int{}, 0, 0
	for _, pc := range pe.channels {
		fmt.Fprintf(&b, "\n• %s: %s", channelRef(pc.sc), kindCounts(pc.erasure.Removed))
		if pc.memories > 0 {
			fmt.Fprintf(&b, "; %s erased", plural(pc.memories, "memory", "memories"))
		}
		if pc.consents > 0 {
			fmt.Fprintf(&b, "; %s revoked", plural(pc.consents, "consent", "consents"))
		}
		markers += pc.erasure.Markers
		for k, n := range pc.erasure.Kept {
			kept[k] += n
		}
		for k, n := range pc.erasure.Restated {
			restated[k] += n
		}
		others += pc.others
		mention += pc.mention
	}
	if pe.connections > 0 {
		fmt.Fprintf(&b, "\n• %s revoked and deleted (I no longer act as %s anywhere)", plural(pe.connections, "connection", "connections"), who)
	}
	b.WriteString("\n*What remains:*")
	fmt.Fprintf(&b, "\n• %s, one per erased or changed record: signed, without text, saying what it was and who asked (so the journal still verifies)", plural(markers, "redaction marker", "redaction markers"))
	b.WriteString("\n• " + who + ", as a user id, on the records of decisions and clicks (approvals, consents, this request), without text")
	if len(restated) > 0 {
		fmt.Fprintf(&b, "\n• approval and audit records that quoted one of %s texts: their ids, tools, decisions and who decided stay, the quoting text is now `%s` (%s)", whose, core.ErasedText, kindCounts(restated))
	}
	if len(kept) > 0 {
		fmt.Fprintf(&b, "\n• other records that quote one of %s texts, kept because the journal needs them (routines, policy, notes by other people): %s", whose, kindCounts(kept))
	}
	if others > 0 {
		fmt.Fprintf(&b, "\n• %d messages by other people that quote one of %s texts (theirs, not erased)", others, whose)
	}
	if mention > 0 {
		fmt.Fprintf(&b, "\n• %d notes added by other people that mention %s (theirs; `delete memory <id>` in their channel)", mention, who)
	}
	b.WriteString("\n• " + platformCopies(platform))
	return b.String()
}
