package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type harness struct {
	t      *testing.T
	signer *core.Signer
	j      *coretest.MemJournal
	s      *coretest.FakeSurface
	m      *coretest.ScriptedModel
	mem    *coretest.Memory
	clk    *clock
	b      *core.Boundary
	cfg    engine.Config
	e      *engine.Engine
	logs   *syncBuffer
	next   atomic.Int64

	mu     sync.Mutex
	posted []core.PostedMessage
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	platform = "test"
	botID    = "UBOT"
)

var cardKey = []byte("0123456789abcdef0123456789abcdef")

var alice = core.Person{ID: "UALICE", Name: "Alice"}
var bob = core.Person{ID: "UBOB", Name: "Bob"}
var carol = core.Person{ID: "UCAROL", Name: "Carol"}

func chanScope(ch string) core.Scope {
	return core.Scope{Platform: platform, Workspace: "W1", Channel: ch}
}

// newHarness builds an engine over an in-memory journal with the given
// model (nil = offline) and tools. Options edit the config before New.
func newHarness(t *testing.T, model *coretest.ScriptedModel, tools []core.Tool, opts ...func(*engine.Config)) *harness {
	t.Helper()
	h := &harness{t: t, signer: coretest.NewSigner(t), s: coretest.NewFakeSurface(platform, botID),
		m: model, mem: coretest.NewMemory(), clk: &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}, logs: &syncBuffer{}}
	h.j = coretest.NewMemJournal(h.signer)
	h.b = core.NewBoundary(h.clk.Now)
	reg, err := gate.NewRegistry(tools...)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	h.cfg = engine.Config{
		Journal: h.j, Boundary: h.b, Tools: reg,
		Surfaces: map[string]core.Surface{platform: h.s},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			if ev.Visibility == core.DM {
				return true, "dm", nil
			}
			if ev.MentionsBot {
				return true, "mention", nil
			}
			if ev.Scope.Thread != "" {
				return true, "thread-window", nil
			}
			return false, "no-window", nil
		}),
		PostObserver: core.PostObserverFunc(func(ctx context.Context, p core.PostedMessage) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.posted = append(h.posted, p)
			return nil
		}),
		Memory:       h.mem.For,
		Logger:       slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:        h.clk.Now,
		CardKey:      cardKey,
		RetryBackoff: time.Millisecond,
	}
	if model != nil {
		h.cfg.Model = model
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.start()
	return h
}

func (h *harness) start() {
	h.t.Helper()
	e, err := engine.New(h.cfg)
	if err != nil {
		h.t.Fatalf("new engine: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		h.t.Fatalf("start: %v", err)
	}
	h.e = e
	h.t.Cleanup(func() { _ = e.Close() })
}

// restart closes the engine and starts a new one on the same journal and
// surface (a process restart).
func (h *harness) restart() {
	h.t.Helper()
	_ = h.e.Close()
	h.start()
}

// mention is a top-level message from p that mentions the bot.
func (h *harness) mention(p core.Person, ch, text string) core.Event {
	return core.Event{Scope: chanScope(ch), Visibility: core.Public, MessageID: h.msgID(), Author: p,
		Text: "<@" + botID + "> " + text, MentionsBot: true, At: h.clk.Now()}
}

// inThread is a message in thread root of ch (routed by the thread window).
func (h *harness) inThread(p core.Person, ch, root, text string) core.Event {
	sc := chanScope(ch)
	sc.Thread = root
	return core.Event{Scope: sc, Visibility: core.Public, MessageID: h.msgID(), Author: p, Text: text, At: h.clk.Now()}
}

func (h *harness) msgID() string { return fmt.Sprintf("M%04d", h.next.Add(1)) }

func (h *harness) deliver(ev core.Event) {
	h.t.Helper()
	if err := h.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		h.t.Fatalf("deliver: %v", err)
	}
}

func (h *harness) click(by core.Person, tok string, sc core.Scope) {
	h.t.Helper()
	if err := h.e.Deliver(context.Background(), core.Inbound{Click: &core.CardClick{Scope: sc, Token: tok, By: by, At: h.clk.Now()}}); err != nil {
		h.t.Fatalf("deliver click: %v", err)
	}
}

func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.e.WaitIdle(ctx); err != nil {
		h.t.Fatalf("engine did not go idle: %v", err)
	}
}

// kinds lists the kinds journaled in ch.
func (h *harness) kinds(ch string) []string {
	var out []string
	for _, c := range h.j.All(chanScope(ch).Key()) {
		out = append(out, c.Kind().String())
	}
	return out
}

func (h *harness) count(ch string, k core.Kind) int {
	n := 0
	for _, c := range h.j.All(chanScope(ch).Key()) {
		if c.Kind() == k {
			n++
		}
	}
	return n
}

// payloads returns the decoded payloads of kind k in ch.
func payloads[T core.Payload](h *harness, ch string, k core.Kind) []T {
	var out []T
	for _, c := range h.j.All(chanScope(ch).Key()) {
		if c.Kind() != k {
			continue
		}
		p, err := core.Decode[T](c)
		if err != nil {
			h.t.Fatalf("decode %s: %v", c, err)
		}
		out = append(out, p)
	}
	return out
}

// runStatus folds the channel and returns the status of its only (or
// latest) run.
func (h *harness) runs(ch string) map[string]*fold.RunState {
	st, err := fold.Fold(chanScope(ch).Key(), h.j.All(chanScope(ch).Key()))
	if err != nil {
		h.t.Fatalf("fold: %v", err)
	}
	return st.Runs
}

func (h *harness) verify(ch string) {
	h.t.Helper()
	if _, err := core.VerifyChannel(context.Background(), h.j, h.signer.Verifier(), chanScope(ch).Key()); err != nil {
		h.t.Fatalf("verify %s: %v", ch, err)
	}
}

// ---- test tools ----

type toolLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *toolLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *toolLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func noteTool(log *toolLog) core.Tool {
	return core.Tool{Name: "note", Description: "take a note", Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Text string }
			_ = json.Unmarshal(args, &a)
			log.add("note:" + a.Text)
			return core.Observation{Text: "noted " + a.Text, Trust: core.Trusted}, nil
		}}
}

// lookupTool returns fixed untrusted content (a fetched page, say).
func lookupTool(content string) core.Tool {
	return core.Tool{Name: "lookup", Description: "look something up", Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			return core.Observation{Text: content, Trust: core.Untrusted}, nil
		}}
}

// sendTool posts to another channel through the tool surface.
func sendTool(log *toolLog) core.Tool {
	return core.Tool{Name: "send_to", Description: "post in a channel", Consequence: core.Send, Targets: []string{"channel"},
		Schema: json.RawMessage(`{"type":"object","properties":{"channel":{"type":"string"},"text":{"type":"string"}},"required":["channel","text"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Channel, Text string }
			_ = json.Unmarshal(args, &a)
			ch := strings.TrimPrefix(a.Channel, "#")
			log.add("send:" + ch)
			sc := core.Scope{Platform: tc.Scope.Platform, Workspace: tc.Scope.Workspace, Channel: ch}
			if _, err := tc.Surface.Post(ctx, core.Outbound{Scope: sc, Text: a.Text}); err != nil {
				return core.Observation{}, err
			}
			return core.Observation{Text: "sent", Trust: core.Trusted}, nil
		}}
}

// replyTool posts in the run's thread.
func replyTool() core.Tool {
	return core.Tool{Name: "reply", Description: "reply in thread", Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Text string }
			_ = json.Unmarshal(args, &a)
			if _, err := tc.Surface.Post(ctx, core.Outbound{Scope: tc.Scope, Text: a.Text}); err != nil {
				return core.Observation{}, err
			}
			return core.Observation{Text: "posted", Trust: core.Trusted}, nil
		}}
}

// wipeTool is irreversible; it logs every execution.
func wipeTool(log *toolLog) core.Tool {
	return core.Tool{Name: "wipe", Description: "delete a record for good", Consequence: core.Irreversible, Targets: []string{"id"},
		Schema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ ID string }
			_ = json.Unmarshal(args, &a)
			log.add("wipe:" + a.ID)
			return core.Observation{Text: "wiped " + a.ID, Trust: core.Trusted}, nil
		}}
}

// askTool escalates a question.
func askTool() core.Tool {
	return core.Tool{Name: "ask", Description: "ask people", Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"},"options":{"type":"array","items":{"type":"string"}}},"required":["question"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct {
				Question string
				Options  []string
			}
			_ = json.Unmarshal(args, &a)
			return core.Observation{Escalate: &core.Escalation{Question: a.Question, Options: a.Options}}, nil
		}}
}

// threadOf returns the scope of the thread rooted at a top-level event.
func threadOf(ev core.Event) core.Scope {
	sc := ev.Scope
	sc.Thread = ev.MessageID
	return sc
}

// lastText returns the text of the view's last message.
func lastText(v core.View) string {
	if len(v.Messages) == 0 {
		return ""
	}
	return v.Messages[len(v.Messages)-1].Text
}
