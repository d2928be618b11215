package core

import (
	"context"
	"errors"
	"time"
)

// Identity is the bot's own account on a platform, resolved live.
type Identity struct {
	UserID string
	Handle string
	Name   string
}

// Inbound is what a surface delivers: exactly one of Event or Click.
type Inbound struct {
	Event *Event
	Click *CardClick
}

// CardField is one labelled value on a card.
type CardField struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// CardAction is one button. Token is short and signed (it fits Telegram's
// 64-byte callback data) and is all the click brings back.
type CardAction struct {
	ID    string `json:"id"`    // approve | decline | ...
	Label string `json:"label"` // button text
	Token string `json:"token"`
	Style string `json:"style,omitempty"` // primary | danger | ""
}

// Card is an interactive message: approvals, escalations, inbox items.
type Card struct {
	ID      string       `json:"id"`
	Title   string       `json:"title"`
	Body    string       `json:"body,omitempty"`
	Fields  []CardField  `json:"fields,omitempty"`
	Actions []CardAction `json:"actions,omitempty"`
	// Resolution, when set, replaces the buttons: who decided what, when.
	Resolution string `json:"resolution,omitempty"`
}

// Outbound is one message the bot sends or edits.
type Outbound struct {
	// Key is the effect's idempotency key: the same key never produces a
	// second post, even across restarts and SDK retries.
	Key   string
	Scope Scope // Thread = root message id to reply in; "" = top level
	Text  string
	Card  *Card
	// Priority final answers and cards over checklist edits when paced.
	Priority Priority
	// Answering is the id of the person's message this post answers (a
	// run's trigger or its latest steering message), "" for none. A
	// surface that answered that message somewhere other than the thread,
	// such as Discord's slash-command response, puts the answer there.
	Answering string
	// Resumed says an earlier process, or an earlier attempt, may already
	// have performed this post (a run resumed after a crash or a failed
	// drive): a surface that keeps its record of Key in memory checks the
	// platform for it before posting.
	Resumed bool
}

// Priority orders outbound work in a rate-limited queue.
type Priority int

const (
	PriorityEdit   Priority = iota // checklist edits: may be coalesced or delayed
	PriorityNormal                 // acknowledgements, replies
	PriorityHigh                   // final answers and approval cards
)

// MessageRef points at a message the bot posted.
type MessageRef struct {
	Scope Scope
	ID    string
	At    time.Time
}

// Surface is one platform connection (Slack, Discord, Telegram, sandbox).
type Surface interface {
	// Name is the platform name used in scopes ("slack", "sandbox", ...).
	Name() string
	// Self resolves the bot's own identity live from the platform.
	Self(ctx context.Context) (Identity, error)
	// Run receives until ctx ends, calling deliver for each inbound item. A
	// platform delivery is acknowledged only after deliver returns nil, so a
	// crash before that means redelivery, not loss.
	Run(ctx context.Context, deliver func(context.Context, Inbound) error) error
	Post(ctx context.Context, out Outbound) (MessageRef, error)
	Update(ctx context.Context, ref MessageRef, out Outbound) error
	React(ctx context.Context, ref MessageRef, emoji string) error
	OpenDM(ctx context.Context, userID string) (Scope, error)
	// History returns earlier messages of a thread, oldest first. Their text
	// is untrusted context.
	History(ctx context.Context, thread Scope, limit int) ([]Event, error)
}

// AttemptedPoster is an optional Surface capability of a platform that
// cannot find a post again after a crash (Telegram: no history read, no
// message metadata). The engine then journals each send attempt
// (message.attempted) through att, so a resumed post knows exactly whether
// an earlier process may have sent a part. Surfaces that can look a post
// up (Slack metadata, the Discord nonce) do not implement it and pay no
// journal write per post.
type AttemptedPoster interface {
	// PostAttempted posts like Post, calling att.Record with a part's key
	// immediately before that part's platform send and not sending when it
	// fails. att.Made says whether an earlier attempt of a part was
	// recorded: only such a part, posted again, may be a second copy.
	PostAttempted(ctx context.Context, out Outbound, att PostAttempts) (MessageRef, error)
}

// PostAttempts is the engine's durable record of send attempts, by part
// key (postledger.PartKey of the post's effect id).
type PostAttempts interface {
	Made(ctx context.Context, key string) bool
	Record(ctx context.Context, key string) error
}

// Administrators is an optional Surface capability: the platform says who
// administers a channel (Slack workspace admins and owners, Discord members
// with Administrator or the guild owner, Telegram chat administrators).
// Governance asks it before refusing a policy change; an error counts as
// "not an admin".
type Administrators interface {
	IsAdmin(ctx context.Context, scope Scope, userID string) (bool, error)
}

// FileUploader is an optional Surface capability: the platform takes a
// file into a conversation (`export my data` uploads a person's data to
// their DM). Without it, the export is a signed link to the bot's HTTP
// address.
type FileUploader interface {
	UploadFile(ctx context.Context, scope Scope, f File) error
}

// File is one file to upload.
type File struct {
	Name    string // "marlowe-export-U1.json"
	Title   string
	Type    string // MIME type
	Content []byte
}

// Rooms is an optional Surface capability: the workspace (Slack team,
// Discord guild) a channel id or a user belongs to, read from the platform.
// The reachability rule (reach.go) keeps every target within the
// requester's own workspace; an error refuses too.
type Rooms interface {
	ChannelWorkspace(ctx context.Context, channel string) (string, error)
	UserInWorkspace(ctx context.Context, workspace, userID string) (bool, error)
}

// MembershipChecker is an optional Surface capability for platforms with
// no workspace (Telegram): whether userID belongs to the chat channel
// (getChatMember). post_to_channel posts only into a chat the requester
// belongs to, and dm_person writes only to someone in the requester's
// chat; an error refuses.
type MembershipChecker interface {
	IsMember(ctx context.Context, channel, userID string) (bool, error)
}

// Ephemeral is an optional Surface capability: a message in a channel that
// only one person sees (Slack chat.postEphemeral, a Discord ephemeral
// interaction reply, a Telegram callback answer). Refusals of clicks that
// journal nothing (a button that does not verify) go only to the clicker.
type Ephemeral interface {
	PostEphemeral(ctx context.Context, scope Scope, userID, text string) error
}

// Typing is an optional Surface capability: the platform's "is typing…"
// indicator (Telegram sendChatAction, Discord's typing endpoint). The
// engine shows it while a run's model call or tool runs. The platform
// clears it by itself after a while (Telegram about 5 s, Discord about
// 10 s) or when the bot posts, so the engine asks again every TypingEvery
// while the work lasts and simply stops asking when the run answers, parks
// or ends. A failure is logged at debug and never fails a run.
type Typing interface {
	Typing(ctx context.Context, scope Scope) error
	// TypingEvery is how often the indicator is asked for again: a little
	// less than it lasts on the platform.
	TypingEvery() time.Duration
}

// AnswersElsewhere is an optional Surface capability: a surface that puts
// the answer to some messages somewhere other than the run's thread (see
// Outbound.Answering: Discord's slash-command response) says which, so the
// engine never folds such an answer into another message, such as an empty
// checklist edited into the answer.
type AnswersElsewhere interface {
	AnswersElsewhere(ctx context.Context, msgID string) bool
}

// Streamer is an optional Surface capability: a run's progress message as
// a stream (Slack's agent surface: chat.startStream / appendStream /
// stopStream) instead of a checklist edited in place. Its plan and tasks
// are state (each update says what every task is now), and its text only
// grows, so every call is safe to repeat: StartStream and AppendStream
// with Resumed set look at the platform for what an earlier process
// already did. The engine streams the run's final answer into the same
// message and stops it when the run ends.
type Streamer interface {
	// Streams reports whether scope's conversation takes a stream now (the
	// app may lack the agent surface): false means the plain checklist.
	Streams(ctx context.Context, scope Scope) bool
	// StartStream starts the message in out.Scope.Thread showing u's plan.
	StartStream(ctx context.Context, out Outbound, u StreamUpdate) (MessageRef, error)
	// AppendStream shows u's plan and tasks and, when u.Text is longer
	// than what the message already holds, appends the rest, paced.
	AppendStream(ctx context.Context, ref MessageRef, u StreamUpdate) error
	// StopStream finishes the message with u's plan and tasks (and its
	// text, like AppendStream). Stopping a stopped stream is not an error.
	StopStream(ctx context.Context, ref MessageRef, u StreamUpdate) error
}

// ErrStreamEnded is what a Streamer returns when the platform says the
// stream is no longer open (stopped elsewhere, or timed out): the caller
// posts what remains as an ordinary message.
var ErrStreamEnded = errors.New("the stream is no longer open")

// StreamUpdate is the state of a streamed message.
type StreamUpdate struct {
	Key   string // the effect's idempotency key
	Title string // the plan's title: "Working on it…", "Done", …
	Tasks []StreamTask
	// Text is the whole answer so far (not a delta).
	Text    string
	Resumed bool // see Outbound.Resumed
	// Recipient is the person the stream answers (Slack needs it to
	// stream outside a DM); "" when none.
	Recipient string
}

// StreamTask is one task of a stream's plan.
type StreamTask struct {
	ID     string
	Title  string
	Status TaskStatus
	Output string // a short result or failure code
}

// TaskStatus is a task's state, as Slack's task_update names it.
type TaskStatus string

const (
	TaskPending    TaskStatus = "pending"
	TaskInProgress TaskStatus = "in_progress"
	TaskComplete   TaskStatus = "complete"
	TaskError      TaskStatus = "error"
)
