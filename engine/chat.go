package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// The chat commands the engine answers from the channel's own state:
// `memories`, `delete memory <id>`, `status`, `approvals` and `cancel`.
// They are deterministic (served with or without a model) and make no tool
// call: the reply is the run's one step. What they read is gathered here,
// with I/O (memory, the platform's admin lookup) outside the channel lock.

const (
	memoryPageSize = 10
	maxListed      = 15 // runs or approvals one reply lists
)

// chatCommand answers an engine-served command for h.
func (d *driver) chatCommand(ctx context.Context, cmd chatcommand.Command, h *humanMsg, pol core.Policy) string {
	switch cmd.Kind {
	case chatcommand.Memories:
		return d.listMemories(ctx, cmd.Page)
	case chatcommand.DeleteMemory:
		return d.deleteMemory(ctx, h, pol, cmd.Arg)
	case chatcommand.DeleteUsage:
		return "Say `delete memory <id>` with the id `memories` shows. It destroys the note for good; `forget <id>` only drops it from recall."
	case chatcommand.Status:
		return d.status(ctx)
	case chatcommand.Approvals:
		return d.pendingApprovals(ctx)
	case chatcommand.Cancel:
		// A `cancel` that reaches a run of its own found nothing live in
		// its thread (the ingress stops a live run; see cancelDraft).
		if h.top {
			return "`cancel` works in a thread: say it in the thread of the work you want me to stop. `status` lists what is running."
		}
		return "Nothing is running in this thread, so there is nothing to cancel."
	}
	return chatcommand.NeedModelText()
}

// authorOf names the person behind a memory writer (runread.go); "" when
// it cannot be read.
func (d *driver) authorOf(by core.Actor) string {
	who, err := authorOf(context.Background(), d.v, by)
	if err != nil {
		d.e.log.Warn("name a memory's author", "error", err)
	}
	return who
}

func (d *driver) listMemories(ctx context.Context, page int) string {
	if d.e.cfg.Memory == nil {
		return "This bot has no memory configured."
	}
	l, ok := d.e.cfg.Memory(d.rs.Scope.Key()).(core.MemoryLister)
	if !ok {
		return "This channel's memory cannot list its notes."
	}
	offset := (page - 1) * memoryPageSize
	mctx, cancel := context.WithTimeout(ctx, d.e.cfg.ToolTimeout)
	defer cancel()
	got, err := l.ListMemories(mctx, offset, memoryPageSize+1)
	if err != nil {
		d.e.log.WarnContext(ctx, "list memories failed", "run", d.rs.ID, "error", err)
		return "I couldn't list the memories just now; try again in a minute."
	}
	more := len(got) > memoryPageSize
	if more {
		got = got[:memoryPageSize]
	}
	if len(got) == 0 {
		if page > 1 {
			return fmt.Sprintf("There is no page %d: this channel has fewer memories. Say `memories` for the newest.", page)
		}
		return "This channel has no memories yet. Say `remember <something>` to add one."
	}
	if err := fillFor(ctx, d.v, got); err != nil {
		return "I could not read who these memories are for. Try again in a moment."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "🧠 Memories of this channel, newest first (page %d):", page)
	for _, m := range got {
		who := "the operator"
		switch a := m.Author(); {
		case a != "":
			who = core.MentionOf(a)
		case m.By.Type == core.ActorAgent:
			who = "an assistant run"
		}
		fmt.Fprintf(&b, "\n• `%s` %s — added by %s, %s", m.ID, core.Truncate(oneLine(m.Text), 200), who, m.At.UTC().Format("2006-01-02 15:04"))
	}
	if more {
		fmt.Fprintf(&b, "\nMore: `memories %d`.", page+1)
	}
	b.WriteString("\n`forget <id>` drops one from recall; `delete memory <id>` destroys it.")
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// deleteMemory is a privacy deletion asked for in chat: allowed to the
// memory's author (its writer, or the person the writing run worked for)
// and to the channel's admins. The actor is the person whose verified
// message asked, as journaled by the ingress.
func (d *driver) deleteMemory(ctx context.Context, h *humanMsg, pol core.Policy, id string) string {
	var del core.MemoryDeleter
	if d.e.cfg.Memory != nil {
		del, _ = d.e.cfg.Memory(d.rs.Scope.Key()).(core.MemoryDeleter)
	}
	if del == nil {
		return "This channel's memory cannot delete notes."
	}
	mctx, cancel := context.WithTimeout(ctx, d.e.cfg.ToolTimeout)
	defer cancel()
	info, err := del.DescribeMemory(mctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return fmt.Sprintf("This channel has no memory `%s`. `memories` lists the ids.", core.Truncate(id, 60))
	}
	if err != nil {
		d.e.log.WarnContext(ctx, "look up memory to delete", "run", d.rs.ID, "memory", id, "error", err)
		return "I couldn't look that memory up just now, so nothing was deleted; try again in a minute."
	}
	if info.Deleted {
		// Also what a run resumed after a crash mid-delete says.
		return fmt.Sprintf("🗑️ Memory `%s` is deleted.", info.ID)
	}
	author := authorOfInfo(d, info)
	if author != h.author.ID {
		if g := d.e.governs(ctx, d.rs.Scope, h.author, pol); !g.admin {
			who := "an admin"
			if author != "" {
				who = core.MentionOf(author) + " (who added it) or an admin"
			}
			return fmt.Sprintf("🚫 Only %s can delete memory `%s`. Nothing was deleted.", who, info.ID)
		}
	}
	by := core.Actor{Type: core.ActorHuman, ID: h.author.ID, Platform: d.rs.Scope.Platform}
	reason := "memory " + info.ID + " deleted in chat by " + h.author.ID
	er, ok := del.(core.MemoryEraser)
	if !ok {
		if err := del.Delete(mctx, by, info.ID, reason); err != nil {
			d.e.log.WarnContext(ctx, "delete memory failed", "run", d.rs.ID, "memory", info.ID, "error", err)
			return fmt.Sprintf("I couldn't finish deleting memory `%s`; say `delete memory %s` again to complete it.", info.ID, info.ID)
		}
		return fmt.Sprintf("🗑️ Deleted memory `%s` from this channel's memory. Other records of its text (the messages and my answers that carried it) were not erased.", info.ID)
	}
	got, err := er.Erase(mctx, by, info.ID, reason)
	// Whatever the erasure redacted is gone from the journal; the cached
	// fold drops what it copied from those commands as it folds their
	// command.redacted records (fold.Channel.forgetSeq): catch it up now
	// rather than at the next append.
	if ferr := d.v.withFresh(ctx, 0, func() {}); ferr != nil {
		d.e.log.WarnContext(ctx, "catch up after erasure", "channel", string(d.v.key), "error", ferr)
	}
	if err != nil {
		d.e.log.WarnContext(ctx, "delete memory failed", "run", d.rs.ID, "memory", info.ID, "error", err)
		return fmt.Sprintf("I couldn't finish deleting memory `%s`; say `delete memory %s` again to complete it.", info.ID, info.ID)
	}
	if err := d.e.eraseOnPlatform(ctx, d.rs.Scope.Platform, d.rs.Scope.Channel, "", core.NewTextMatcher(info.Text)); err != nil {
		d.e.log.WarnContext(ctx, "delete memory: erase the platform's copies", "run", d.rs.ID, "memory", info.ID, "error", err)
		return fmt.Sprintf("I couldn't finish deleting memory `%s`; say `delete memory %s` again to complete it.", info.ID, info.ID)
	}
	d.e.log.InfoContext(ctx, "memory deleted in chat", "run", d.rs.ID, "memory", info.ID, "by", h.author.ID, "redacted", got.RemovedTotal())
	return erasureReply(info.ID, got, d.rs.Scope.Platform)
}

// erasureReply says exactly what an erasure removed and what remains.
func erasureReply(id string, got core.Erasure, platform string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "🗑️ Deleted memory `%s`. Its text is erased from this channel's journal: %s", id, kindCounts(got.Removed))
	fmt.Fprintf(&b, ". Each of those is now a redaction marker (%s, signed, without text, saying you asked), so the journal still verifies.", plural(got.Markers, "marker", "markers"))
	b.WriteString(" The memory index keeps only a tombstone (id and dates; no text, no embedding).")
	if len(got.OtherMemories) > 0 {
		ids := make([]string, len(got.OtherMemories))
		for i, o := range got.OtherMemories {
			ids[i] = "`" + o + "`"
		}
		fmt.Fprintf(&b, "\nStill holding this text: other memories %s (say `delete memory <id>` for each).", strings.Join(ids, ", "))
	}
	if len(got.Restated) > 0 {
		fmt.Fprintf(&b, "\nApproval and audit records that quoted it keep their ids, decisions and who decided, with the text replaced by `%s`: %s.", core.ErasedText, kindCounts(got.Restated))
	}
	if len(got.Kept) > 0 {
		fmt.Fprintf(&b, "\nStill holding this text, kept because the journal needs them to know what was decided or finished: %s.", kindCounts(got.Kept))
	}
	b.WriteString("\n" + strings.ToUpper(platformCopies(platform)[:1]) + platformCopies(platform)[1:] + ".")
	return b.String()
}

// recordWords names a journal kind for people: what the record was, not
// its kind ("2 of your messages", not "2 message.received").
var recordWords = map[string][2]string{
	"message.received":   {"message", "messages"},
	"message.posted":     {"reply of mine", "replies of mine"},
	"message.updated":    {"edit of a reply of mine", "edits of replies of mine"},
	"model.step":         {"model step", "model steps"},
	"permission.decided": {"permission decision", "permission decisions"},
	"tool.requested":     {"tool call", "tool calls"},
	"tool.completed":     {"tool result", "tool results"},
	"memory.written":     {"note", "notes"},
	"run.started":        {"record of a conversation's start", "records of conversations' starts"},
	"approval.requested": {"approval request", "approval requests"},
	"approval.resolved":  {"approval decision", "approval decisions"},
	"routine.created":    {"routine", "routines"},
	"routine.changed":    {"routine change", "routine changes"},
	"report.filed":       {"report", "reports"},
}

// kindCounts renders per-kind counts in words, in a fixed order: "1
// message, 2 model steps (…)".
func kindCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	other := 0
	for _, k := range keys {
		w, ok := recordWords[k]
		switch {
		case !ok:
			other += m[k]
		case m[k] == 1:
			parts = append(parts, "1 "+w[0])
		default:
			parts = append(parts, fmt.Sprintf("%d %s", m[k], w[1]))
		}
	}
	if other > 0 {
		parts = append(parts, plural(other, "other record", "other records"))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// platformCopies says what happens to the messages on the platform
// itself, which an erasure does not touch: on a chat platform the person
// deletes them there; the sandbox cannot delete a message, and keeps its
// copies in its data file.
func platformCopies(platform string) string {
	if platform == "sandbox" {
		return "the sandbox's own copies (its page, sandbox.jsonl in the data directory, and the files attached there) are erased too"
	}
	return "messages on " + platformName(platform) + " itself are not changed: delete them there"
}

func platformName(p string) string {
	switch p {
	case "slack":
		return "Slack"
	case "discord":
		return "Discord"
	case "telegram":
		return "Telegram"
	case "":
		return "the platform"
	}
	return p
}

// runHistory is the conversation history a new run records, each turn by
// the seq of its command and without its text (docs/architecture.md,
// "Erasure by reference"): none for a
// command the grammar answers by itself (it reads no history), so a
// `delete memory` run never records the text it erases, nor a personal
// command (`forget me`, `what do you know about me`) the history. Callers hold v.mu.
func runHistory(v *chanView, msg *core.MessageReceived) []core.ThreadTurn {
	text := chatcommand.StripLeadingMention(msg.Text, msg.Mentions)
	if chatcommand.Parse(text).Deterministic() || chatcommand.ParseInbox(text).Kind != chatcommand.InboxNone {
		return nil
	}
	h := v.fold.History(msg.Conversation)
	for i := range h {
		if h[i].Seq > 0 {
			h[i].Text = "" // recorded by reference: ReadRunReplay reads it back
		}
	}
	return h
}

func authorOfInfo(d *driver, m core.MemoryInfo) string {
	if m.By.Type == core.ActorHuman {
		return m.By.ID
	}
	return d.authorOf(m.By)
}

// liveRunInfo is one unfinished run as `status` lists it.
type liveRunInfo struct {
	id, thread string
	status     core.RunStatus
	requester  core.Person
	startedAt  time.Time
	waitingOn  string // the tool or question of a pending approval
}

func (d *driver) status(ctx context.Context) string {
	var runs []liveRunInfo
	_ = d.v.with(ctx, func() {
		for _, r := range d.v.fold.Runs() {
			if r.Status.Terminal() || r.ID == d.rs.ID {
				continue
			}
			li := liveRunInfo{id: r.ID, thread: r.Thread, status: r.Status, requester: r.Requester, startedAt: r.StartedAt}
			for _, a := range d.v.fold.Approvals() {
				if a.Run == r.ID && a.Pending() {
					li.waitingOn = a.Tool
					if a.Question != "" {
						li.waitingOn = "an answer"
					}
				}
			}
			runs = append(runs, li)
		}
	})
	if len(runs) == 0 {
		return "💤 Nothing is running or waiting in this channel." + d.spendLine(ctx)
	}
	slices.SortFunc(runs, func(a, b liveRunInfo) int { return a.startedAt.Compare(b.startedAt) })
	now := d.e.now()
	var b strings.Builder
	fmt.Fprintf(&b, "📋 %s in this channel:", plural(len(runs), "run", "runs"))
	for i, r := range runs {
		if i == maxListed {
			fmt.Fprintf(&b, "\n… and %d more.", len(runs)-i)
			break
		}
		what := statusWord(r)
		who := "a routine"
		if r.requester.ID != "" {
			who = core.MentionOf(r.requester.ID)
		}
		fmt.Fprintf(&b, "\n• %s — asked by %s %s ago — %s", what, who, age(now.Sub(r.startedAt)), d.threadRef(ctx, r.thread))
	}
	b.WriteString("\nSay `cancel` in a run's thread to stop it.")
	b.WriteString(d.spendLine(ctx))
	return b.String()
}

func statusWord(r liveRunInfo) string {
	switch r.status {
	case core.RunQueued, core.RunWorking:
		return "⏳ working"
	case core.RunWaitingApproval:
		if r.waitingOn == "an answer" {
			return "❓ waiting for an answer"
		}
		return "🔐 waiting for approval of " + toolLabel(r.waitingOn)
	case core.RunNeedsPermission:
		return "🔐 needs permission"
	case core.RunBlocked:
		return "⏸ paused"
	case core.RunBroken, core.RunCancelled, core.RunDone:
		return string(r.status)
	}
	panic(fmt.Sprintf("core: unhandled run status %q", r.status))
}

func (d *driver) pendingApprovals(ctx context.Context) string {
	var as []fold.Approval
	_ = d.v.with(ctx, func() {
		for _, a := range d.v.fold.Approvals() {
			if a.Pending() {
				as = append(as, *a)
			}
		}
	})
	if len(as) == 0 {
		return "✅ Nothing is waiting for approval in this channel."
	}
	slices.SortFunc(as, func(a, b fold.Approval) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	now := d.e.now()
	var b strings.Builder
	fmt.Fprintf(&b, "🔐 %s waiting in this channel:", plural(len(as), "request", "requests"))
	for i, a := range as {
		if i == maxListed {
			fmt.Fprintf(&b, "\n… and %d more.", len(as)-i)
			break
		}
		what := toolLabel(a.Tool) + " (" + string(a.Consequence) + ")"
		if a.Question != "" {
			what = "question: " + core.Truncate(oneLine(a.Question), 120)
		}
		exp := "expires in " + age(a.ExpiresAt.Sub(now))
		if !now.Before(a.ExpiresAt) {
			exp = "expiring now"
		}
		fmt.Fprintf(&b, "\n• %s — asked by %s, %s — %s", what, core.MentionOf(a.Requester), exp, d.threadRef(ctx, a.Scope.Thread))
	}
	b.WriteString("\nDecide on the card in each thread.")
	return b.String()
}

// threadRef is a link to a thread when the surface can make one, else the
// thread's root message id.
func (d *driver) threadRef(ctx context.Context, thread string) string {
	if thread == "" {
		return "in the DM"
	}
	if pl, ok := d.s.(core.Permalinker); ok {
		sc := d.rs.Scope
		sc.Thread = thread
		lctx, cancel := context.WithTimeout(ctx, adminLookupTimeout)
		link, err := pl.Permalink(lctx, core.MessageRef{Scope: sc, ID: thread})
		cancel()
		if err == nil && link != "" {
			return link
		}
		if err != nil {
			d.e.log.WarnContext(ctx, "permalink failed; showing the thread id", "thread", thread, "error", err)
		}
	}
	return "thread " + thread
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// age renders a duration the way people say it: 40s, 5m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(max(0, int(d/time.Second))) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// ---- cancel ----

// cancelRequest is what the ingress knows about a `cancel` message before
// it appends: whether its author may stop the thread's live run (its
// requester or an admin). Asking the platform about admins is I/O, so it
// happens before the channel's append, like mayDecidePending.
type cancelRequest struct {
	may func(r *fold.Run) bool
}

// cancelFor returns nil unless ev is a `cancel` in a thread with a live run.
func (e *Engine) cancelFor(ctx context.Context, v *chanView, ev core.Event, thread string) *cancelRequest {
	if chatcommand.Parse(chatcommand.StripLeadingMention(ev.Text, ev.Mentions)).Kind != chatcommand.Cancel {
		return nil
	}
	var live bool
	var requester string
	var pol core.Policy
	_ = v.with(ctx, func() {
		pol = e.policyLocked(v)
		if r, _ := v.liveRun(thread); r != nil {
			live, requester = true, r.Requester.ID
		}
	})
	if !live {
		return nil // a run of its own answers it
	}
	if requester == ev.Author.ID {
		return &cancelRequest{may: func(r *fold.Run) bool { return r.Requester.ID == ev.Author.ID }}
	}
	admin := e.governs(ctx, ev.Scope, ev.Author, pol).admin
	return &cancelRequest{may: func(r *fold.Run) bool { return admin || r.Requester.ID == ev.Author.ID }}
}

// cancelCause is the reason a cancelled run shows.
func cancelCause(p core.Person) string { return "cancelled by " + core.MentionOf(p.ID) }

// cancelDrafts plans the ingress's answer to a `cancel` for live run r:
// the run's end (in the name of the person who asked) after their message,
// or, when they may not, the message alone as a channel message (not
// steering: the model does not take orders meant for the harness) and a
// refusal. Callers hold v.mu.
func (e *Engine) cancelDrafts(v *chanView, cr *cancelRequest, r *fold.Run, ev core.Event, msg *core.MessageReceived) (drafts []core.Draft, refusal *notice, err error) {
	if !cr.may(r) {
		mr, err := e.b.Human(ev.Author, ev.Scope, core.Meta{}, msg)
		if err != nil {
			return nil, nil, err
		}
		who := "the person who asked"
		if r.Requester.ID != "" {
			who = core.MentionOf(r.Requester.ID)
		}
		// Private to the person refused: the thread goes on as it shows.
		return []core.Draft{mr}, &notice{key: "cancel-refused/" + ev.MessageID, scope: ev.Scope, cause: mr.ID(),
			text: "🚫 Only " + who + " or an admin can cancel this. It goes on.", to: ev.Author.ID}, nil
	}
	mr, err := e.b.Human(ev.Author, ev.Scope, core.Meta{Run: r.ID}, msg)
	if err != nil {
		return nil, nil, err
	}
	drafts = []core.Draft{mr}
	for _, a := range v.fold.Approvals() {
		if a.Run != r.ID || !a.Pending() {
			continue
		}
		d, err := e.b.Human(ev.Author, a.Scope, core.Meta{Run: r.ID, Cause: mr.ID()},
			&core.ApprovalResolved{ApprovalID: a.ID, Decision: "superseded", By: ev.Author})
		if err != nil {
			return nil, nil, err
		}
		drafts = append(drafts, d)
	}
	fd, err := e.b.Human(ev.Author, ev.Scope, core.Meta{Run: r.ID, Cause: mr.ID()}, &core.RunFailed{Status: core.RunCancelled, Cause: cancelCause(ev.Author)})
	if err != nil {
		return nil, nil, err
	}
	return append(drafts, fd), nil, nil
}

// errInterrupted ends a model call that a cancel made pointless.
var errInterrupted = errors.New("run interrupted: it was cancelled")

// interruptible returns a context for one model call of run that
// interrupt cancels; stop releases it.
func (e *Engine) interruptible(ctx context.Context, run string) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	if e.inflight == nil {
		e.inflight = map[string]context.CancelCauseFunc{}
	}
	e.inflight[run] = cancel
	e.mu.Unlock()
	return cctx, func() {
		e.mu.Lock()
		delete(e.inflight, run)
		e.mu.Unlock()
		cancel(nil)
	}
}

// interrupt stops run's in-flight model call, if any: the run was
// cancelled, and its driver must not wait for an answer nobody will see.
func (e *Engine) interrupt(run string) {
	e.mu.Lock()
	cancel := e.inflight[run]
	e.mu.Unlock()
	if cancel != nil {
		cancel(errInterrupted)
	}
}
