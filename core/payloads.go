package core

import (
	"encoding/json"
	"time"
)

// Payload is the typed body of a Command. The interface is sealed: only this
// package declares payload types, one per Kind.
type Payload interface {
	Kind() Kind
	sealed()
}

// Current payload schema version per kind. Raising one means adding an
// upcaster in upcast.go; stored payloads are never rewritten.
func currentVersion(k Kind) int {
	if k == KindMessageReceived {
		return 2
	}
	return 1
}

// newPayload returns a zero payload of k's type. TestEveryKindIsHandled keeps
// this switch (and the fold's) exhaustive.
func newPayload(k Kind) (Payload, bool) {
	switch k {
	case KindMessageReceived:
		return &MessageReceived{}, true
	case KindCardClicked:
		return &CardClicked{}, true
	case KindRunStarted:
		return &RunStarted{}, true
	case KindModelStep:
		return &ModelStep{}, true
	case KindToolRequested:
		return &ToolRequested{}, true
	case KindPermissionDecided:
		return &PermissionDecided{}, true
	case KindApprovalRequested:
		return &ApprovalRequested{}, true
	case KindApprovalResolved:
		return &ApprovalResolved{}, true
	case KindConsentGranted:
		return &ConsentGranted{}, true
	case KindConsentRevoked:
		return &ConsentRevoked{}, true
	case KindToolCompleted:
		return &ToolCompleted{}, true
	case KindMessagePosted:
		return &MessagePosted{}, true
	case KindMessageUpdated:
		return &MessageUpdated{}, true
	case KindMemoryWritten:
		return &MemoryWritten{}, true
	case KindMemoryForgotten:
		return &MemoryForgotten{}, true
	case KindMemoryRedacted:
		return &MemoryRedacted{}, true
	case KindRoutineCreated:
		return &RoutineCreated{}, true
	case KindRoutineChanged:
		return &RoutineChanged{}, true
	case KindRoutineFired:
		return &RoutineFired{}, true
	case KindRunPaused:
		return &RunPaused{}, true
	case KindRunCompleted:
		return &RunCompleted{}, true
	case KindRunFailed:
		return &RunFailed{}, true
	case KindPolicyChanged:
		return &PolicyChanged{}, true
	case KindCommandRedacted:
		return &CommandRedacted{}, true
	case KindReportFiled:
		return &ReportFiled{}, true
	case KindReportDismissed:
		return &ReportDismissed{}, true
	case KindErasureRequested:
		return &ErasureRequested{}, true
	case KindConnectionChanged:
		return &ConnectionChanged{}, true
	case KindErasureResolved:
		return &ErasureResolved{}, true
	case KindMessageAttempted:
		return &MessageAttempted{}, true
	case KindFoldCheckpoint:
		return &FoldCheckpoint{}, true
	}
	return nil, false
}

// MessageReceived: a routed message from a person (v2; v1 carried only a user id).
type MessageReceived struct {
	MessageID  string     `json:"message_id"`
	Author     Person     `json:"author"`
	Visibility Visibility `json:"visibility"`
	Text       string     `json:"text"`
	Mentions   []Mention  `json:"mentions,omitempty"`
	ReplyTo    string     `json:"reply_to,omitempty"`
	Reason     string     `json:"reason"` // the intent filter's route reason
	// Conversation is the key of the conversation the message joined
	// (ConversationDM, a thread root, or the message id that started a
	// top-level exchange or reply chain), decided at ingress from the
	// channel's fold and recorded so every replay, restart and replica folds
	// it the same. "" in messages recorded before conversations: their
	// thread is their conversation.
	Conversation string `json:"conversation,omitempty"`
	// Attachments are the files shared with the message, as declared (no
	// bytes). What the model saw of them is journaled by the run.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// ConversationDM is the conversation key of a DM: a DM is one conversation.
const ConversationDM = "dm"

// RouteToplevelWindow is the route reason of a top-level follow-up routed by
// the channel's top-level window (intent.ReasonToplevelWindow's name): it
// continues the exchange that opened the window.
const RouteToplevelWindow = "toplevel-window"

type CardClicked struct {
	Card   string `json:"card"`
	Action string `json:"action"`
	Token  string `json:"token"`
	By     Person `json:"by"`
}

type RunStarted struct {
	Trigger     string `json:"trigger"` // message id or routine id that started it
	Instruction string `json:"instruction"`
	Unattended  bool   `json:"unattended,omitempty"`
	// History is the recent turns of the conversation the trigger joined
	// (earlier runs' messages and answers, oldest first, bounded in turns and
	// tokens), recorded so a replay sees the same view.
	History []ThreadTurn `json:"history,omitempty"`
	// InputLimit is how many characters of any one person's message the
	// model sees in this run (0: all, as in runs recorded before the limit).
	// Recorded so a replay builds the same view whatever its configuration.
	InputLimit int `json:"input_limit,omitempty"`
	// Owner is the person an unattended run works for (a routine's owner):
	// its requester, whose inbox gets its consent requests.
	Owner *Person `json:"owner,omitempty"`
	// Context is an unattended run's untrusted data (UnattendedRun.Context),
	// kept apart from Instruction, the trusted text.
	Context string `json:"context,omitempty"`
}

// ThreadTurn is one earlier message of a conversation: a person's or the
// bot's. Seq names the command it came from (a message.received or the
// bot's message.posted, in the same channel). RunStarted.History records
// turns by Seq with no Text (runs since erasure by reference): the text is
// read from that command when the run is replayed, so erasing the command
// erases the turn from every history that names it. Turns recorded before
// carry their Text and no Seq.
type ThreadTurn struct {
	Author Person `json:"author"`
	Bot    bool   `json:"bot,omitempty"`
	Text   string `json:"text,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
}

// Usage is what one model call spent.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// ToolCall is a model's request to run a tool. Args is the argument text
// exactly as the model produced it: untrusted and possibly not even JSON.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

type ModelStep struct {
	Index     int        `json:"index"`
	Provider  string     `json:"provider,omitempty"`
	Model     string     `json:"model,omitempty"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
	Final     bool       `json:"final,omitempty"`
	// Steering lists the message.received command ids (steering messages
	// that arrived while the run worked) added to the view before this call,
	// so a replay rebuilds the exact view the model saw.
	Steering []string `json:"steering,omitempty"`
}

type ToolRequested struct {
	Call ToolCall `json:"call"`
	// AutoRecall marks a call the harness made itself, not the model: the
	// automatic recall for new human messages (their message.received
	// command ids). Its tool.completed carries the notes injected into the
	// view just before those messages.
	AutoRecall []string `json:"auto_recall,omitempty"`
	// ReadAttachments marks the harness's own reading of the files shared
	// with these human messages (their message.received command ids). Its
	// tool.completed carries what the model saw (Attachments).
	ReadAttachments []string `json:"read_attachments,omitempty"`
}

type PermissionDecided struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"` // allow | deny | ask
	Reason   string `json:"reason"`
}

type ApprovalRequested struct {
	ApprovalID  string    `json:"approval_id"`
	CallID      string    `json:"call_id"`
	Tool        string    `json:"tool"`
	Consequence string    `json:"consequence"`
	Summary     string    `json:"summary"`
	Requester   string    `json:"requester"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Question is set for an escalation (ask_human): people answer by
	// picking one of Options instead of approving a tool call.
	Question    string   `json:"question,omitempty"`
	Reason      string   `json:"reason,omitempty"`      // why the gate asked
	Destination string   `json:"destination,omitempty"` // the target the decision is about
	Options     []string `json:"options,omitempty"`     // question choices
	// Notify are the people whose DM inbox gets the card (eligible
	// approvers other than the requester, a question's addressees, an
	// unattended run's owner), fixed when the request is made so every
	// replica and restart renders the same cards.
	Notify []string `json:"notify,omitempty"`
	// Unattended marks a consent request of a run nobody watches: the run
	// waits as needs-permission and the card goes only to its owner.
	Unattended bool `json:"unattended,omitempty"`
	// InDM marks a request asked in a direct message with the bot: with no
	// approvers listed, only the channel's admins decide it.
	InDM bool `json:"in_dm,omitempty"`
	// SignIn marks a run waiting for its requester to connect this server
	// (their own sign-in): it is resolved, approved in the requester's name,
	// when they have connected, and the call runs again.
	SignIn string `json:"sign_in,omitempty"`
	// ActsAs is whose own account the call runs as ("" : the bot's
	// credentials), for the card.
	ActsAs string `json:"acts_as,omitempty"`
	// SharedAccount names the connector server whose shared (bot)
	// credentials the call runs with, for the card.
	SharedAccount string `json:"shared_account,omitempty"`
	// Pin is set on a question asking the channel's admins to accept a
	// connector tool's changed definition (this hash): only admins answer.
	Pin string `json:"pin,omitempty"`
	// InDoubt is set on a question about a connector call whose outcome a
	// crash made unknown: send it again, or skip it.
	InDoubt bool `json:"in_doubt,omitempty"`
}

type ApprovalResolved struct {
	ApprovalID string `json:"approval_id"`
	// Decision: approved | declined | expired | superseded (a newer message
	// in the thread took over) | answered (a question's option was picked).
	Decision string `json:"decision"`
	By       Person `json:"by"`
	Choice   string `json:"choice,omitempty"` // the picked option of a question
}

type ConsentGranted struct {
	// ConsentID names the grant for `consent revoke` ("" in grants made
	// before ids existed: the command id stands in).
	ConsentID   string `json:"consent_id,omitempty"`
	Tool        string `json:"tool"`
	Destination string `json:"destination,omitempty"`
	// Owner is who granted it (the clicker of "Always allow").
	Owner string `json:"owner"`
	// Covers is what the grant covers: CoversChannel, every run in the
	// channel, granted by one of its approvers or admins. Grants recorded
	// before it ("") count only while their owner is one of the channel's
	// approvers.
	Covers string `json:"covers,omitempty"`
}

// CoversChannel is ConsentGranted.Covers of a channel-wide grant.
const CoversChannel = "channel"

type ConsentRevoked struct {
	ConsentID   string `json:"consent_id,omitempty"`
	Tool        string `json:"tool"`
	Destination string `json:"destination,omitempty"`
	Owner       string `json:"owner"`
}

type ToolCompleted struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	OK     bool   `json:"ok"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	Trust  string `json:"trust,omitempty"` // trusted | untrusted
	// Code classifies a failed call for the model and for counting:
	// invalid | unknown-tool | denied | declined | superseded | expired |
	// error | interrupted.
	Code string `json:"code,omitempty"`
	// Checklist, when set, is the run's new plan (update_checklist).
	Checklist []ChecklistItem `json:"checklist,omitempty"`
	// Notes are an automatic recall's memories, as injected into the view
	// (see ToolRequested.AutoRecall); Degraded says the recall ran on
	// keywords only.
	Notes    []Recalled `json:"notes,omitempty"`
	Degraded bool       `json:"degraded,omitempty"`
	// Attachments are what the model saw of shared files (see
	// ToolRequested.ReadAttachments): extracted text, transcripts, image
	// hashes, notes. Replays and resumed runs read them from here.
	Attachments []AttachmentSeen `json:"attachments,omitempty"`
}

// MessagePosted: the bot posted; it opens or extends intent windows.
type MessagePosted struct {
	EffectID      string `json:"effect_id"`
	MessageID     string `json:"message_id"`
	Answering     string `json:"answering,omitempty"`      // message id answered, "" for unprompted
	AnsweringUser string `json:"answering_user,omitempty"` // its author
	AnsweringTop  bool   `json:"answering_top,omitempty"`  // the answered message was top level
	Role          string `json:"role,omitempty"`           // answer | checklist | card | digest
	Text          string `json:"text,omitempty"`
	// Stream says the message is a stream (core.Streamer): the checklist
	// started as one, or the answer streamed into it (MessageID is then
	// the checklist's).
	Stream bool `json:"stream,omitempty"`
}

// MessageAttempted: a surface that cannot find its posts again after a
// crash (core.AttemptedPoster) is about to send part EffectID (a
// postledger part key: the post's effect id, "#i" for a later part). It is
// journaled immediately before the platform call, so a resumed post whose
// part has no such record was never sent, and one that has it may have been.
type MessageAttempted struct {
	EffectID string `json:"effect_id"`
}

type MessageUpdated struct {
	EffectID  string `json:"effect_id"`
	MessageID string `json:"message_id"`
	Text      string `json:"text,omitempty"`
}

// Provenance says where a memory came from.
type Provenance struct {
	Origin     string `json:"origin"` // command id
	Actor      Actor  `json:"actor"`
	Trust      string `json:"trust"`
	Derivation string `json:"derivation"`
}

type MemoryWritten struct {
	MemoryID   string     `json:"memory_id"`
	Text       string     `json:"text"`
	Provenance Provenance `json:"provenance"`
}

type MemoryForgotten struct {
	MemoryID string `json:"memory_id"`
	Reason   string `json:"reason,omitempty"`
}

type MemoryRedacted struct {
	MemoryID string `json:"memory_id"`
	Seq      uint64 `json:"seq"` // the memory.written command whose payload was destroyed
}

type RoutineCreated struct {
	RoutineID   string `json:"routine_id"`
	Cron        string `json:"cron"`
	TZ          string `json:"tz"`
	Instruction string `json:"instruction"`
	Owner       string `json:"owner"`
	Armed       bool   `json:"armed"`
	// Schedule is the schedule as the person typed it ("every weekday at
	// 09:00"), which `routines` shows; "" when they typed the spec itself
	// (or in records from before it was kept).
	Schedule string `json:"schedule,omitempty"`
}

type RoutineChanged struct {
	RoutineID   string `json:"routine_id"`
	Cron        string `json:"cron,omitempty"`
	TZ          string `json:"tz,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Schedule is the new schedule as typed, with Cron (see RoutineCreated).
	Schedule string `json:"schedule,omitempty"`
	Armed    bool   `json:"armed"`
	// Deleted ends the routine for good (routine delete).
	Deleted bool `json:"deleted,omitempty"`
}

type RoutineFired struct {
	RoutineID string    `json:"routine_id"`
	Slot      time.Time `json:"slot"`
	// Outcome is "fired" (the default when absent), "skipped" (the slot was
	// missed by more than the grace window) or "manual" (routine run).
	Outcome string `json:"outcome,omitempty"`
	// Missed counts earlier slots passed over without firing (downtime).
	Missed int    `json:"missed,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Coalesced marks a skipped slot that a later catch-up firing covers:
	// after downtime only the latest missed slot within grace fires, and
	// the earlier ones within grace are journaled skipped and coalesced.
	Coalesced bool `json:"coalesced,omitempty"`
}

type RunPaused struct {
	Status RunStatus `json:"status"`
	Reason string    `json:"reason"`
}

type RunCompleted struct {
	Summary string `json:"summary,omitempty"`
}

type RunFailed struct {
	Status RunStatus `json:"status"`
	Cause  string    `json:"cause"`
}

type PolicyChanged struct {
	Policy Policy `json:"policy"`
}

// CommandRedacted records a privacy deletion of another command's payload.
type CommandRedacted struct {
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
	// TargetKind is the redacted command's kind ("" in records written before
	// it), so the marker says what was removed without its payload.
	TargetKind string `json:"target_kind,omitempty"`
	// Restated, when set, is the hex sha256 of the restatement that stands
	// in the target's place: its payload with the erased free text removed
	// (restate.go), so a decision record keeps who decided what.
	Restated string `json:"restated,omitempty"`
}

// ReportFiled: a report for a routine's owner (a skipped slot, a post that
// never arrived, drift), journaled in the routine's channel. It is an item
// of the owner's DM inbox until they dismiss it (report.go).
type ReportFiled struct {
	ReportID string      `json:"report_id"` // the notice key: one report per key
	Owner    string      `json:"owner"`
	Title    string      `json:"title"`
	Body     string      `json:"body,omitempty"`
	Fields   []CardField `json:"fields,omitempty"`
	Cause    string      `json:"cause,omitempty"` // the command it is about (routine.fired)
}

// ReportDismissed: the owner dismissed a report (the command's time is when).
type ReportDismissed struct {
	ReportID string `json:"report_id"`
	By       Person `json:"by"`
}

// ErasureRequested: someone asked, in their DM, to erase everything a
// person wrote (`forget me`, or an operator's `forget <@user>`): journaled in
// that DM with the asker as actor, shown as a confirmation card whose
// signed buttons name ErasureID. It holds ids only, no text.
type ErasureRequested struct {
	ErasureID string    `json:"erasure_id"`
	Person    string    `json:"person"` // whose texts are erased
	ExpiresAt time.Time `json:"expires_at"`
}

// ErasureResolved: the asker's click on the card (confirmed or cancelled),
// or its expiry. A request is resolved once; the erasure runs after a
// confirmed resolution.
type ErasureResolved struct {
	ErasureID string `json:"erasure_id"`
	Decision  string `json:"decision"` // confirmed | cancelled | expired
	By        Person `json:"by"`
}

func (*MessageReceived) Kind() Kind   { return KindMessageReceived }
func (*CardClicked) Kind() Kind       { return KindCardClicked }
func (*RunStarted) Kind() Kind        { return KindRunStarted }
func (*ModelStep) Kind() Kind         { return KindModelStep }
func (*ToolRequested) Kind() Kind     { return KindToolRequested }
func (*PermissionDecided) Kind() Kind { return KindPermissionDecided }
func (*ApprovalRequested) Kind() Kind { return KindApprovalRequested }
func (*ApprovalResolved) Kind() Kind  { return KindApprovalResolved }
func (*ConsentGranted) Kind() Kind    { return KindConsentGranted }
func (*ConsentRevoked) Kind() Kind    { return KindConsentRevoked }
func (*ToolCompleted) Kind() Kind     { return KindToolCompleted }
func (*MessagePosted) Kind() Kind     { return KindMessagePosted }
func (*MessageUpdated) Kind() Kind    { return KindMessageUpdated }
func (*MemoryWritten) Kind() Kind     { return KindMemoryWritten }
func (*MemoryForgotten) Kind() Kind   { return KindMemoryForgotten }
func (*MemoryRedacted) Kind() Kind    { return KindMemoryRedacted }
func (*RoutineCreated) Kind() Kind    { return KindRoutineCreated }
func (*RoutineChanged) Kind() Kind    { return KindRoutineChanged }
func (*RoutineFired) Kind() Kind      { return KindRoutineFired }
func (*RunPaused) Kind() Kind         { return KindRunPaused }
func (*RunCompleted) Kind() Kind      { return KindRunCompleted }
func (*RunFailed) Kind() Kind         { return KindRunFailed }
func (*PolicyChanged) Kind() Kind     { return KindPolicyChanged }
func (*CommandRedacted) Kind() Kind   { return KindCommandRedacted }
func (*ReportFiled) Kind() Kind       { return KindReportFiled }
func (*ReportDismissed) Kind() Kind   { return KindReportDismissed }
func (*ErasureRequested) Kind() Kind  { return KindErasureRequested }
func (*ConnectionChanged) Kind() Kind { return KindConnectionChanged }
func (*ErasureResolved) Kind() Kind   { return KindErasureResolved }
func (*MessageAttempted) Kind() Kind  { return KindMessageAttempted }
func (*FoldCheckpoint) Kind() Kind    { return KindFoldCheckpoint }

func (*MessageReceived) sealed()   {}
func (*CardClicked) sealed()       {}
func (*RunStarted) sealed()        {}
func (*ModelStep) sealed()         {}
func (*ToolRequested) sealed()     {}
func (*PermissionDecided) sealed() {}
func (*ApprovalRequested) sealed() {}
func (*ApprovalResolved) sealed()  {}
func (*ConsentGranted) sealed()    {}
func (*ConsentRevoked) sealed()    {}
func (*ToolCompleted) sealed()     {}
func (*MessagePosted) sealed()     {}
func (*MessageUpdated) sealed()    {}
func (*MemoryWritten) sealed()     {}
func (*MemoryForgotten) sealed()   {}
func (*MemoryRedacted) sealed()    {}
func (*RoutineCreated) sealed()    {}
func (*RoutineChanged) sealed()    {}
func (*RoutineFired) sealed()      {}
func (*RunPaused) sealed()         {}
func (*RunCompleted) sealed()      {}
func (*RunFailed) sealed()         {}
func (*PolicyChanged) sealed()     {}
func (*CommandRedacted) sealed()   {}
func (*ReportFiled) sealed()       {}
func (*ReportDismissed) sealed()   {}
func (*ErasureRequested) sealed()  {}
func (*ConnectionChanged) sealed() {}
func (*ErasureResolved) sealed()   {}
func (*MessageAttempted) sealed()  {}
func (*FoldCheckpoint) sealed()    {}

// FoldCheckpoint: a snapshot of the channel's fold (core/fold) as it stood
// after seq Seq, appended at Seq+1 by the channel's owner so a load restores
// it and folds only what follows. Format is the snapshot's encoding version
// (fold.SnapshotFormat); a loader that does not know it folds the whole
// channel. The snapshot is a JSON object, not a string, so an erasure's
// CarriesText finds the conversation text inside it.
type FoldCheckpoint struct {
	Format   int             `json:"format"`
	Seq      uint64          `json:"seq"`
	Snapshot json.RawMessage `json:"snapshot,omitempty"`
}
