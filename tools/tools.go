// Package tools holds Marlowe's built-in tools. Each is a core.Tool with a
// schema, a consequence level and its target arguments declared, so the
// gate can decide about it; none sees the journal or the boundary, only the
// core.ToolContext the harness lends it (surface, scope, channel memory).
//
// Register them with gate.NewRegistry(tools.Builtins(opts)...). Later
// tools (routines, inbox, MCP) are registered the same way.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Options configures the tools that need it. The zero value is production
// ready.
type Options struct {
	// HTTPClient is used by fetch_url. Nil: egress.NewClient(), which
	// refuses every special-purpose address, proxies and cross-host
	// redirects. The composition root passes that same client.
	HTTPClient *http.Client
	// FetchTimeout bounds one fetch (default 15 s).
	FetchTimeout time.Duration
	// FetchMaxBytes caps how much of a response is read (default 1 MiB).
	FetchMaxBytes int64
	// FetchMaxText caps the text handed to the model (default 8000 bytes).
	FetchMaxText int
	// HistoryLimit is read_thread's default message count (default 30).
	HistoryLimit int
}

// Builtins returns every built-in tool.
func Builtins(o Options) []core.Tool {
	return []core.Tool{
		ReplyInThread(), UpdateChecklist(), Remember(), Recall(), Forget(),
		ReadThread(o), FetchURL(o), PostToChannel(), DMPerson(), AskHuman(), ListMemories(),
	}
}

// decode unmarshals validated arguments into a struct.
func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("read arguments: %w", err)
	}
	return nil
}

func trusted(format string, a ...any) core.Observation {
	return core.Observation{Text: fmt.Sprintf(format, a...), Trust: core.Trusted}
}

// ReplyInThread posts a message in the run's thread. The model's final text
// is posted as the answer anyway; the harness skips that final post when
// this tool already answered, so an answer never appears twice.
func ReplyInThread() core.Tool {
	return core.Tool{
		Name:        "reply_in_thread",
		Description: "Post a message in the current thread now (for example a partial result). Your final answer is posted automatically; do not repeat it with this tool.",
		Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"text":{"type":"string","description":"the message to post"}},"required":["text"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Text string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if strings.TrimSpace(a.Text) == "" {
				return core.Observation{}, errors.New("text is empty")
			}
			ref, err := tc.Surface.Post(ctx, core.Outbound{Scope: tc.Scope, Text: a.Text, Priority: core.PriorityHigh})
			if err != nil {
				return core.Observation{}, fmt.Errorf("post in thread: %w", err)
			}
			return trusted("Posted in the thread (message %s). It is your answer: do not repeat it as final text.", ref.ID), nil
		},
	}
}

// UpdateChecklist replaces the plan shown on the run's checklist message.
func UpdateChecklist() core.Tool {
	return core.Tool{
		Name:        "update_checklist",
		Description: "Show your plan on the progress checklist in the thread: the full list of steps, each marked done or not.",
		Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"items":{"type":"array","items":{"type":"object","properties":{
				"text":{"type":"string"},"done":{"type":"boolean"}},"required":["text"]}}},
			"required":["items"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Items []core.ChecklistItem }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			const maxItems = 8
			if len(a.Items) > maxItems {
				a.Items = a.Items[:maxItems]
			}
			obs := trusted("Checklist updated (%d items).", len(a.Items))
			obs.Checklist = a.Items
			if obs.Checklist == nil {
				obs.Checklist = []core.ChecklistItem{}
			}
			return obs, nil
		},
	}
}

var errNoMemory = errors.New("memory is not configured for this bot")

// Remember stores a note in the channel's memory, with provenance.
func Remember() core.Tool {
	return core.Tool{
		Name:        "remember",
		Description: "Remember a fact or preference for this channel (only when someone asks you to, or it is clearly meant to be kept).",
		Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"text":{"type":"string","description":"the note, self-contained"}},"required":["text"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Text string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if tc.Memory == nil {
				return core.Observation{}, errNoMemory
			}
			if strings.TrimSpace(a.Text) == "" {
				return core.Observation{}, errors.New("nothing to remember: text is empty")
			}
			id, err := tc.Memory.Remember(ctx, a.Text)
			if dup := (*core.DuplicateMemoryError)(nil); errors.As(err, &dup) {
				return trusted("Already remembered (id %s).", dup.ID), nil
			}
			if err != nil {
				return core.Observation{}, fmt.Errorf("remember: %w", err)
			}
			return trusted("Remembered (id %s).", id), nil
		},
	}
}

// Recall searches the channel's memory.
func Recall() core.Tool {
	return core.Tool{
		Name:        "recall",
		Description: "Search this channel's memory.",
		Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"query":{"type":"string"},"limit":{"type":"integer","description":"at most this many notes (default 3)"}},
			"required":["query"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct {
				Query string
				Limit int
			}
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if tc.Memory == nil {
				return core.Observation{}, errNoMemory
			}
			if a.Limit <= 0 || a.Limit > 20 {
				a.Limit = 3
			}
			hits, degraded, err := recall(ctx, tc.Memory, a.Query, a.Limit)
			if err != nil {
				return core.Observation{}, fmt.Errorf("recall: %w", err)
			}
			// The heading tells the person (through the answer) when recall
			// ran on keywords only: no embedding model was reachable.
			how := ""
			if degraded {
				how = " (keywords only: no embedding model answered)"
			}
			if len(hits) == 0 {
				return trusted("No memories match %q%s.", a.Query, how), nil
			}
			var b strings.Builder
			fmt.Fprintf(&b, "Notes matching %q%s:", a.Query, how)
			for _, h := range hits {
				fmt.Fprintf(&b, "\n• [%s] %s", h.ID, h.Text)
			}
			// Notes were written from conversations: data, not orders.
			return core.Observation{Text: b.String(), Trust: core.Untrusted}, nil
		},
	}
}

// Forget removes a note from recall.
func Forget() core.Tool {
	return core.Tool{
		Name:        "forget",
		Description: "Forget one note of this channel's memory, by its id (ids come from recall).",
		Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"id":{"type":"string"},"reason":{"type":"string"}},"required":["id"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ ID, Reason string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if tc.Memory == nil {
				return core.Observation{}, errNoMemory
			}
			if err := tc.Memory.Forget(ctx, strings.TrimSpace(a.ID), a.Reason); err != nil {
				return core.Observation{}, fmt.Errorf("forget: %w", err)
			}
			return trusted("Forgotten %s.", a.ID), nil
		},
	}
}

// ReadThread returns the thread's earlier messages (untrusted).
func ReadThread(o Options) core.Tool {
	def := o.HistoryLimit
	if def <= 0 {
		def = 30
	}
	return core.Tool{
		Name:        "read_thread",
		Description: "Read the earlier messages of the current thread.",
		Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"limit":{"type":"integer","description":"how many recent messages (default 30, at most 100)"}}}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Limit int }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if a.Limit <= 0 {
				a.Limit = def
			}
			a.Limit = min(a.Limit, 100)
			evs, err := tc.Surface.History(ctx, tc.Scope, a.Limit)
			if err != nil {
				return core.Observation{}, fmt.Errorf("read thread: %w", err)
			}
			if len(evs) == 0 {
				return core.Observation{Text: "(no earlier messages)", Trust: core.Untrusted}, nil
			}
			var b strings.Builder
			for i, ev := range evs {
				if i > 0 {
					b.WriteByte('\n')
				}
				name := ev.Author.Name
				if name == "" {
					name = ev.Author.ID
				}
				fmt.Fprintf(&b, "[%s] %s: %s", ev.At.UTC().Format("15:04"), name, ev.Text)
			}
			return core.Observation{Text: b.String(), Trust: core.Untrusted}, nil
		},
	}
}

// PostToChannel posts in another channel of the same workspace. The channel
// is a target: one that came from content rather than the person needs an
// approval, and any new destination does by default (send).
func PostToChannel() core.Tool {
	return core.Tool{
		Name:        "post_to_channel",
		Description: "Post a message at the top level of another channel (by channel id). Needs approval unless the person named that channel.",
		Consequence: core.Send,
		Targets:     []string{"channel"},
		Schema: json.RawMessage(`{"type":"object","properties":{
			"channel":{"type":"string","description":"channel id"},
			"text":{"type":"string"}},"required":["channel","text"]}`),
		Check: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Consequence, error) {
			var a struct{ Channel, Text string }
			if err := decode(args, &a); err != nil {
				return "", err
			}
			ch := channelID(a.Channel)
			if ch == "" || strings.ContainsAny(ch, "/ ") {
				return "", fmt.Errorf("channel %q is not a channel id", a.Channel)
			}
			return "", channelReachable(ctx, tc, ch)
		},
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Channel, Text string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			ch := channelID(a.Channel)
			if ch == "" || strings.ContainsAny(ch, "/ ") {
				return core.Observation{}, fmt.Errorf("channel %q is not a channel id", a.Channel)
			}
			// Asked again now: the requester may have left the room while
			// the call waited for approval.
			if err := channelReachable(ctx, tc, ch); err != nil {
				return core.Observation{}, err
			}
			sc := core.Scope{Platform: tc.Scope.Platform, Workspace: tc.Scope.Workspace, Channel: ch}
			ref, err := tc.Surface.Post(ctx, core.Outbound{Scope: sc, Text: a.Text, Priority: core.PriorityNormal})
			if err != nil {
				return core.Observation{}, fmt.Errorf("post to %s: %w", ch, err)
			}
			return trusted("Posted to channel %s (message %s).", ch, ref.ID), nil
		},
	}
}

// DMPerson sends someone a direct message.
func DMPerson() core.Tool {
	return core.Tool{
		Name:        "dm_person",
		Description: "Send a direct message to a person (by user id). Needs approval unless the person who asked named them.",
		Consequence: core.Send,
		Targets:     []string{"user"},
		Schema: json.RawMessage(`{"type":"object","properties":{
			"user":{"type":"string","description":"user id"},
			"text":{"type":"string"}},"required":["user","text"]}`),
		Check: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Consequence, error) {
			var a struct{ User, Text string }
			if err := decode(args, &a); err != nil {
				return "", err
			}
			uid := core.UserRef(a.User)
			if uid == "" {
				return "", fmt.Errorf("user %q is not a user id", a.User)
			}
			return "", userReachable(ctx, tc, uid)
		},
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ User, Text string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			uid := core.UserRef(a.User)
			if uid == "" {
				return core.Observation{}, fmt.Errorf("user %q is not a user id", a.User)
			}
			if err := userReachable(ctx, tc, uid); err != nil {
				return core.Observation{}, err
			}
			sc, err := tc.Surface.OpenDM(ctx, uid)
			if err != nil {
				return core.Observation{}, fmt.Errorf("open DM with %s: %w", uid, err)
			}
			ref, err := tc.Surface.Post(ctx, core.Outbound{Scope: sc, Text: a.Text, Priority: core.PriorityNormal})
			if err != nil {
				return core.Observation{}, fmt.Errorf("DM %s: %w", uid, err)
			}
			return trusted("Sent a direct message to %s (message %s).", uid, ref.ID), nil
		},
	}
}

// channelReachable applies the one reachability rule (core.CheckReach):
// the requester must be able to read the room now, on the platform.
func channelReachable(ctx context.Context, tc core.ToolContext, ch string) error {
	if err := core.CheckReach(ctx, tc.Surface, tc.Scope, tc.Actor.ID, ch); err != nil {
		return fmt.Errorf("not posting there: %w", err)
	}
	return nil
}

// userReachable applies the rule for people (core.CheckPersonReach).
func userReachable(ctx context.Context, tc core.ToolContext, uid string) error {
	if err := core.CheckPersonReach(ctx, tc.Surface, tc.Scope, uid); err != nil {
		return fmt.Errorf("not writing to %s: %w", uid, err)
	}
	return nil
}

// AskHuman escalates a decision to people: the harness posts a card with
// the options in the thread and parks the run until someone answers. Named
// people (ask) or the channel's admins also get it in their DM inbox, with
// its deadline. Whom to ask is a target: a name that did not come from the
// requester needs approval, so fetched content cannot page people.
func AskHuman() core.Tool {
	return core.Tool{
		Name: "ask_human",
		Description: "Ask people to decide something you should not decide alone. Give the question, the options and the context they need; " +
			"name who should answer in ask (user ids, or \"admins\" for the channel's admins) and, if it matters, a deadline in minutes. The run waits for the answer or the deadline.",
		Consequence: core.Write,
		Targets:     []string{"ask"},
		Schema: json.RawMessage(`{"type":"object","properties":{
			"question":{"type":"string"},
			"options":{"type":"array","items":{"type":"string"},"description":"2 to 5 short choices (default yes / no)"},
			"context":{"type":"string","description":"what they need to know to decide"},
			"ask":{"type":"array","items":{"type":"string"},"description":"who should answer: user ids, or admins (default: the people in the thread)"},
			"deadline_minutes":{"type":"integer","description":"how long to wait for the answer"}},
			"required":["question"]}`),
		// The people named are reached in their inboxes (DMs): each must
		// be reachable by the requester, as dm_person's person is.
		Check: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Consequence, error) {
			var a struct{ Ask []string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			for _, who := range a.Ask {
				w := strings.TrimSpace(who)
				if uid := core.UserRef(w); uid != "" && !strings.EqualFold(strings.TrimLeft(w, "@"), "admins") {
					if err := userReachable(ctx, tc, uid); err != nil {
						return "", err
					}
				}
			}
			return "", nil
		},
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct {
				Question        string
				Options         []string
				Context         string
				Ask             []string
				DeadlineMinutes int `json:"deadline_minutes"`
			}
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if strings.TrimSpace(a.Question) == "" {
				return core.Observation{}, errors.New("question is empty")
			}
			var opts []string
			for _, o := range a.Options {
				if o = strings.TrimSpace(o); o != "" {
					opts = append(opts, o)
				}
			}
			if len(opts) > 5 {
				return core.Observation{}, errors.New("at most 5 options")
			}
			if a.DeadlineMinutes < 0 {
				return core.Observation{}, errors.New("deadline_minutes must be positive")
			}
			esc := &core.Escalation{Question: a.Question, Options: opts, Context: a.Context, Deadline: time.Duration(a.DeadlineMinutes) * time.Minute}
			for _, who := range a.Ask {
				switch w := strings.TrimSpace(who); {
				case strings.EqualFold(strings.TrimLeft(w, "@"), "admins"):
					esc.ToAdmins = true
				case w != "":
					esc.To = append(esc.To, w)
				}
			}
			return core.Observation{Escalate: esc}, nil
		},
	}
}

// channelID reads a channel reference: <#C1|general>, #general, C1.
func channelID(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">")
	if i := strings.IndexByte(s, '|'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimLeft(s, "#")
}

// statusRecaller is a memory that can say whether recall was lexical only.
type statusRecaller interface {
	RecallWithStatus(ctx context.Context, query string, limit int) ([]core.Recalled, bool, error)
}

func recall(ctx context.Context, m core.ToolMemory, query string, limit int) ([]core.Recalled, bool, error) {
	if sr, ok := m.(statusRecaller); ok {
		return sr.RecallWithStatus(ctx, query, limit)
	}
	hits, err := m.Recall(ctx, query, limit)
	return hits, false, err
}
