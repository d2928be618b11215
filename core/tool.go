package core

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Trust classifies where content came from. Untrusted content may fill
// payload fields but never a tool's targets.
type Trust string

const (
	Trusted   Trust = "trusted"   // the person's own message, an approval, operator config
	Untrusted Trust = "untrusted" // fetched pages, other channels, tool output, thread history
)

// Observation is what a tool returns to the run.
type Observation struct {
	Text  string `json:"text"`
	Trust Trust  `json:"trust"`
	// Checklist, when set, replaces the model's plan shown on the run's
	// checklist message.
	Checklist []ChecklistItem `json:"checklist,omitempty"`
	// Escalate, when set, asks people a question: the harness posts a card
	// and parks the run until someone answers (ask_human).
	Escalate *Escalation `json:"escalate,omitempty"`
	// SignIn, when set, names a server the call needs the requester's own
	// sign-in to: nothing was sent. The harness parks the run, sends the
	// requester a private sign-in link, and runs the call again once they
	// have connected (docs/connectors.md, "Acting as each person").
	SignIn string `json:"sign_in,omitempty"`
}

// ChecklistItem is one line of a run's plan.
type ChecklistItem struct {
	Text string `json:"text"`
	Done bool   `json:"done,omitempty"`
}

// Escalation is a decision package put to people.
type Escalation struct {
	Question string   `json:"question"`
	Context  string   `json:"context,omitempty"`
	Options  []string `json:"options,omitempty"` // empty: yes / no
	// To names the people asked (platform user ids); ToAdmins asks the
	// channel's admins. Either puts the question in their DM inboxes.
	To       []string `json:"to,omitempty"`
	ToAdmins bool     `json:"to_admins,omitempty"`
	// Deadline is how long the run waits for the answer (0: the approval
	// TTL); past it the run ends visibly.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// ToolContext is what a tool may use while running: the run's scope and the
// capabilities the harness lends it. Tools never see the journal or a Boundary.
type ToolContext struct {
	Run     string
	Scope   Scope
	Actor   Person // the person whose message started the run
	Surface Surface
	// Memory is the channel's memory, bound to this call's provenance.
	Memory ToolMemory
	// CallID is the model's id for this call; Origin the id of the
	// tool.requested command (for provenance).
	CallID string
	Origin string
	// EffectKey is the call's deterministic idempotency key: stable across
	// a crash and re-execution, for tools that call external systems. Posts
	// through Surface are keyed by the harness already.
	EffectKey string
	// Trust is Untrusted once the run's context holds untrusted content
	// (fetched pages, tool output): what the model writes may derive from it.
	Trust Trust
	// Offered is the tools this run is offered in its channel right now
	// (the channel's policy applied): a tool that lists other tools, like
	// find_tool, shows only these. nil offers none.
	Offered []string
	// Progress, when set, lets a long call say it is alive (a server's
	// progress notifications): the harness shows the latest on the run's
	// checklist. Safe to call from any goroutine, often; never blocks.
	Progress func(Progress)
}

// Progress is how far a running tool call has come. Total 0 is unknown.
type Progress struct {
	Done    float64
	Total   float64
	Message string
}

// ChannelMemory is one channel's memory as the engine sees it (implemented
// by memory/, bound to a single channel). Tools never get it: they get a
// ToolMemory the engine bound to the call's provenance.
type ChannelMemory interface {
	Remember(ctx context.Context, text string, prov Provenance) (id string, err error)
	Recall(ctx context.Context, query string, limit int) ([]Recalled, error)
	Forget(ctx context.Context, id string, reason string) error
}

// DuplicateMemoryError is Remember's answer when the channel already
// keeps a memory with the same text: nothing new was stored.
type DuplicateMemoryError struct{ ID string }

func (e *DuplicateMemoryError) Error() string { return "already remembered (id " + e.ID + ")" }

// Recalled is one memory returned by recall.
type Recalled struct {
	ID    string  `json:"id"`
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}

// TurnRecaller is a ChannelMemory that can recall for a turn on its own:
// when a channel's memory handle implements it, the engine recalls for each
// new human message of a run (the trigger and each steering message), once,
// before the first model call that sees the message, and injects the notes
// into that call's volatile tier as untrusted data. Without it, memory is
// reached through the recall tool only.
type TurnRecaller interface {
	// RecallForTurn recalls for one turn's queries within the memory's
	// per-turn budget. thread names the thread the notes are injected
	// into ("" = none): memories already injected there recently are not
	// returned again.
	RecallForTurn(ctx context.Context, thread string, queries ...string) (TurnRecall, error)
}

// TurnRecall is what one turn's recall injects.
type TurnRecall struct {
	Snippets []Recalled
	// Degraded is true when recall ran on keywords only (no embedding
	// model configured or reachable): the run says so in one word.
	Degraded bool
	// Tokens estimates the injected size.
	Tokens int
}

// Tool is a registered capability. The model can only name it; the harness
// validates, gates and runs it.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	Consequence Consequence
	// Targets are top-level argument names that pick a recipient, channel,
	// URL host, id or amount: untrusted text may not choose them.
	Targets []string
	Run     func(ctx context.Context, tc ToolContext, args json.RawMessage) (Observation, error)
	// ActsAsRequester marks a tool that calls its server with the
	// requester's own sign-in (a connector in "person" identity mode):
	// approval cards say whose account the call runs as.
	ActsAsRequester bool
	// Check, when set, judges a call's validated arguments before the gate
	// asks anyone: an error refuses the call at once (its reason is the
	// call's result; no approval card is shown), so a call that would fail
	// never costs a person a click. It returns the consequence of this call
	// ("" is Consequence): the read-only form of a write tool (the routine
	// tool's `routines`) is Read, which is never gated. It must not act.
	Check func(ctx context.Context, tc ToolContext, args json.RawMessage) (Consequence, error)
	// Connector is set on a tool a connector offers (nil: built in).
	Connector *ToolOrigin
}

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Validate checks a tool's declaration. A tool that fails it stops the
// process at start.
func (t Tool) Validate() error {
	nameRE := toolName
	if t.Connector != nil {
		nameRE = connectorToolName
	}
	if !nameRE.MatchString(t.Name) {
		return fmt.Errorf("tool %q: name must match %s", t.Name, nameRE)
	}
	if !t.Consequence.Valid() {
		return fmt.Errorf("tool %q: missing or invalid consequence level %q (want read, write, send or irreversible)", t.Name, t.Consequence)
	}
	if t.Run == nil {
		return fmt.Errorf("tool %q: no Run function", t.Name)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(t.Schema, &schema); err != nil {
		return fmt.Errorf("tool %q: schema is not a JSON object: %w", t.Name, err)
	}
	if schema.Type != "object" {
		return fmt.Errorf("tool %q: schema type must be \"object\", got %q", t.Name, schema.Type)
	}
	for _, target := range t.Targets {
		if _, ok := schema.Properties[target]; !ok {
			return fmt.Errorf("tool %q: target %q is not a schema property", t.Name, target)
		}
	}
	return nil
}
