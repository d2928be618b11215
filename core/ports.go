package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Router decides whether an event reaches the bot at all (the intent filter
// satisfies it through a small adapter). An ignored event leaves no trace:
// the engine neither journals it, nor reacts, nor logs its text.
type Router interface {
	Route(ctx context.Context, ev Event) (route bool, reason string, err error)
}

// RouterFunc adapts a function to Router.
type RouterFunc func(ctx context.Context, ev Event) (bool, string, error)

func (f RouterFunc) Route(ctx context.Context, ev Event) (bool, string, error) { return f(ctx, ev) }

// PostedMessage is one of the bot's own posts, as journaled: what the intent
// windows are opened and extended from.
type PostedMessage struct {
	Command   Command // the message.posted command
	Scope     Scope   // where it was posted; Thread is the thread root ("" = top level)
	MessageID string
	At        time.Time
	Role      string // answer | checklist | card | notice | message

	Answering     string // message id answered ("" when unprompted)
	AnsweringUser string
	AnsweringTop  bool // the answered message was at top level
	AnsweringDM   bool // the answered message was in a DM
	Policy        Policy

	// AnsweringAt is when the answered message was routed (journaled); zero
	// when unprompted. At minus it is the latency a person feels.
	AnsweringAt time.Time
}

// PostObserver is told about each bot post after its message.posted is
// journaled. Errors are logged; they never fail the run.
type PostObserver interface {
	ObservePost(ctx context.Context, p PostedMessage) error
}

// PostIntentObserver is a PostObserver that also hears about a post just
// before it is sent (Command nil, MessageID empty): the intent filter opens
// the windows the post will open, so a reply the instant it appears is not
// missed.
type PostIntentObserver interface {
	PostObserver
	ObservePostIntent(ctx context.Context, p PostedMessage) error
}

// PostObserverFunc adapts a function to PostObserver.
type PostObserverFunc func(ctx context.Context, p PostedMessage) error

func (f PostObserverFunc) ObservePost(ctx context.Context, p PostedMessage) error { return f(ctx, p) }

// HomeView is an optional Surface capability: a per-person page the
// platform shows outside any conversation (Slack's App Home tab). The
// engine republishes a person's inbox there whenever an item of theirs
// appears or is decided, and when they open it (PublishHome).
type HomeView interface {
	PublishHome(ctx context.Context, userID string, items []InboxItem) error
}

// Permalinker is an optional Surface capability: a link people can open to
// a message (Slack chat.getPermalink). `status` and `approvals` link each
// thread with it.
type Permalinker interface {
	Permalink(ctx context.Context, ref MessageRef) (string, error)
}

// RoleInbox marks a card posted in a person's DM inbox.
const RoleInbox = "inbox"

// DMHelp is an optional Surface capability: how a person lets the bot
// message them privately, for platforms where the bot cannot open a DM by
// itself (a Telegram user who never started the bot).
type DMHelp interface {
	EnableDMHelp(userID string) string
}

// InboxItem is one thing waiting for a person: a decision, or a routine report to read.
type InboxItem struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"` // approval | consent | question | report
	Where       Scope     `json:"where"`
	Title       string    `json:"title"`
	Summary     string    `json:"summary,omitempty"`
	Requester   string    `json:"requester,omitempty"`
	Consequence string    `json:"consequence,omitempty"`
	Destination string    `json:"destination,omitempty"`
	RequestedAt time.Time `json:"requested_at"` // a report: when it was filed
	ExpiresAt   time.Time `json:"expires_at"`   // a report: when it leaves the inbox undismissed
}

// AckReaction is the reaction that acknowledges a routed message, by its
// Slack name; surfaces without emoji names map it to 👀.
const AckReaction = "eyes"

// Post roles recorded in message.posted.
const (
	RoleAnswer    = "answer"
	RoleChecklist = "checklist"
	RoleCard      = "card"
	RoleNotice    = "notice"
	RoleMessage   = "message" // a tool's post outside the run's thread
)

// EffectID is the deterministic id of the index-th effect requested by the
// command at seq in channel ch. It is the effect's idempotency key
// (Outbound.Key): a crash and resume re-issue the same key, and surfaces
// drop a key they have already performed.
func EffectID(ch ChannelKey, seq uint64, index int) string {
	h := sha256.New()
	h.Write([]byte(ch))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatUint(seq, 10)))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	return "fx" + hex.EncodeToString(h.Sum(nil)[:12])
}

// PresencePrefix prefixes each replica's presence lease: how a replica
// knows whether any other one is alive to take its channels over.
const PresencePrefix = "replica:"

type actGuardKey struct{}

// WithActGuard hands check to whoever performs the effects ctx is given
// for: ActGuard(ctx) calls it.
func WithActGuard(ctx context.Context, check func() error) context.Context {
	return context.WithValue(ctx, actGuardKey{}, check)
}

// ActGuard reports whether the effect ctx was handed with may still be
// performed on the platform: nil when ctx carries no guard (embedded mode,
// a call from outside a drive), an error when the drive's channel lease
// may have lapsed or passed to another replica. An adapter that queues
// effects calls it just before performing one, and returns its error
// instead of performing it.
func ActGuard(ctx context.Context) error {
	if g, ok := ctx.Value(actGuardKey{}).(func() error); ok {
		return g()
	}
	return nil
}

// UserRef reads a user reference as written in a message: <@U1>, <@U1|bob>,
// @U1 or U1. Platform ids are case-sensitive on some platforms, so only the
// decoration is removed.
func UserRef(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">")
	if i := strings.IndexByte(s, '|'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimLeft(s, "@!")
}

// DigestPost is a routine's top-level post.
type DigestPost struct {
	Scope Scope  // the channel (Thread is ignored: digests go to top level)
	Key   string // idempotency key, the same on every retry
	Cause string // the routine.fired command
	Text  string
	// Retry says an earlier attempt (maybe by a replica that died) may have
	// posted it: the surface checks the platform for Key before posting.
	Retry bool
}

// OwnerNotice is a card for a routine's owner, in their DM inbox.
type OwnerNotice struct {
	Where Scope  // the routine's channel
	Owner string // platform user id
	Key   string // idempotency key: one card per key, across retries and replicas
	Cause string // the command it is about (routine.fired)
	Title string
	Body  string
	// Fields are extra lines (label: value).
	Fields []CardField
}

// UnattendedRun is what starts a run nobody watches.
type UnattendedRun struct {
	Scope Scope  // where it posts (a channel; Thread "" = top level)
	Owner Person // on whose behalf it works: its requester
	// Instruction is the trusted text of the run: only what a person typed
	// for it (a routine's instruction as its owner, or the admin who last
	// edited it, wrote it). The gate's "named by the requester" rule counts
	// this text alone.
	Instruction string
	// Context is data the run works from (a routine's digest and run
	// history: other people's messages, the bot's earlier answers, memory
	// texts). The model sees it fenced as untrusted content; it never
	// counts as the owner's words.
	Context string
	Trigger string // the routine id or task id that fired it
	// RunID, when set, is the run's id, fixed by the caller (a routine
	// firing's KeyedID): starting it again is a no-op that returns it, and
	// two replicas starting it at once journal one run.started.
	RunID string
}

// RoutineProposal is what a proposal card shows: the scheduler renders the
// schedule (words, next firings in the routine's zone) and core signs it.
type RoutineProposal struct {
	RoutineID   string
	CreatedID   string // the routine.created command's id
	Owner       string // the requester: the only one who may arm it
	Spec        string
	Words       string   // the spec in words: "every weekday at 09:00"
	TZ          string   // IANA zone
	Next        []string // the next firings, formatted in TZ
	Instruction string
}

// RunMetrics hears what an operator's dashboard counts: runs reaching a
// terminal status and every model call. It is called on run goroutines, so
// an implementation must be cheap and must not block (counters, not I/O).
type RunMetrics interface {
	// RunEnded is told once per run that reaches done, broken or cancelled
	// on this replica.
	RunEnded(status RunStatus)
	// ModelCalled is told of each model call attempt (retries count
	// separately): how long it took, what it used, and its error if any.
	ModelCalled(elapsed time.Duration, usage Usage, err error)
}

func MentionOf(id string) string {
	if id == "" {
		return "the requester"
	}
	return "<@" + id + ">"
}

func MentionList(ids []string) string {
	if len(ids) == 0 {
		return "anyone in the channel"
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = MentionOf(id)
	}
	return strings.Join(out, ", ")
}

// PanelHints is what an assistant panel (Slack's agent surface) suggests
// from when a person opens it: what waits for them and what they asked.
// Counts only; the panel's prompts lead to `inbox` and
// `what do you know about me`, which show the items in the person's DM.
type PanelHints struct {
	// Decisions counts the approvals, consent requests and questions
	// waiting for the person's decision (their inbox, without reports).
	Decisions int
	// Reports counts the open reports of the person's routines; Report is
	// the newest one's title.
	Reports int
	Report  string
	// Asked counts the pending approvals the person requested.
	Asked int
}
