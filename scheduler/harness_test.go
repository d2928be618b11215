package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/scheduler"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
func (c *clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

var (
	alice = core.Person{ID: "UALICE", Name: "Alice"}
	bob   = core.Person{ID: "UBOB", Name: "Bob"}
	room  = core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"}
)

// world is an offline engine, a fake surface and a scheduler over one
// in-memory journal, all on one fake clock.
type world struct {
	t      *testing.T
	signer *core.Signer
	j      *coretest.MemJournal
	s      *coretest.FakeSurface
	clk    *clock
	b      *core.Boundary
	e      *engine.Engine
	sch    *scheduler.Scheduler
	next   atomic.Int64
	model  core.Model  // nil: offline (digests)
	tools  []core.Tool // registered beside the scheduler's own
	// cfg, when set, adjusts the scheduler's configuration.
	cfg func(*scheduler.Config)
	// wrap, when set, is the engine's surface around s.
	wrap func(*coretest.FakeSurface) core.Surface
}

// newModelWorld is newWorld with a model answering runs.
func newModelWorld(t *testing.T, m core.Model) *world {
	t.Helper()
	w := &world{t: t, signer: coretest.NewSigner(t), clk: &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}, model: m}
	w.j = coretest.NewMemJournal(w.signer)
	w.s = coretest.NewFakeSurface("test", "UBOT")
	w.start(w.j)
	return w
}

// idle waits until the engine has driven every run it holds.
func (w *world) idle() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.e.WaitIdle(ctx); err != nil {
		w.t.Fatal(err)
	}
}

// count counts the room's commands of kind k.
func (w *world) count(k core.Kind) int {
	n := 0
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == k {
			n++
		}
	}
	return n
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, signer: coretest.NewSigner(t), clk: &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}}
	w.j = coretest.NewMemJournal(w.signer)
	w.s = coretest.NewFakeSurface("test", "UBOT")
	w.start(w.j)
	return w
}

// start builds the engine and scheduler over j (again, for a restart).
func (w *world) start(j *coretest.MemJournal) {
	t := w.t
	w.j = j
	w.b = core.NewBoundary(w.clk.Now)
	var err error
	sc := scheduler.Config{Journal: j, Boundary: w.b, Clock: w.clk.Now,
		MinInterval: 5 * time.Minute, Grace: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	if w.cfg != nil {
		w.cfg(&sc)
	}
	w.sch, err = scheduler.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := gate.NewRegistry(append([]core.Tool{w.sch.Tool(), w.sch.ProposeTool()}, w.tools...)...)
	if err != nil {
		t.Fatal(err)
	}
	var surface core.Surface = w.s
	if w.wrap != nil {
		surface = w.wrap(w.s)
	}
	w.e, err = engine.New(engine.Config{
		Journal: j, Boundary: w.b, Tools: reg, Model: w.model, Surfaces: map[string]core.Surface{"test": surface},
		Router:  core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
		CardKey: []byte("routine-test-card-key-0123456789"), Clock: w.clk.Now, Logger: slog.New(slog.DiscardHandler),
		Operators: []core.Operator{{Platform: "test", UserID: "UADMIN"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.sch.Bind(w.e)
	t.Cleanup(func() { _ = w.e.Close() })
}

// restart closes the engine and builds everything again over the same
// journal, as a new process would.
func (w *world) restart() {
	w.t.Helper()
	if err := w.e.Close(); err != nil {
		w.t.Fatal(err)
	}
	w.start(w.j.Reopen(w.signer))
}

// say delivers a top-level message and returns the bot's reply in its thread.
func (w *world) say(by core.Person, text string) string {
	w.t.Helper()
	id := fmt.Sprintf("M%04d", w.next.Add(1))
	ev := core.Event{Scope: room, Visibility: core.Public, MessageID: id, Author: by, Text: text, MentionsBot: true, At: w.clk.Now()}
	if err := w.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		w.t.Fatalf("deliver: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.e.WaitIdle(ctx); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, p := range w.s.Posts() {
		if p.Out.Scope.Thread == id {
			out = append(out, p.Out.Text)
		}
	}
	return strings.Join(out, "\n")
}

// dms are the bot's posts in user's DM (owner notices).
func (w *world) dms(user string) []string {
	var out []string
	for _, p := range w.s.Posts() {
		if p.Out.Scope.Channel == "D-"+user {
			out = append(out, p.Out.Text)
		}
	}
	return out
}

// digests are the bot's top-level posts in the room.
func (w *world) digests() []string {
	var out []string
	for _, p := range w.s.Posts() {
		if p.Out.Scope.Thread == "" && p.Out.Scope.Channel == room.Channel {
			out = append(out, p.Out.Text)
		}
	}
	return out
}

func (w *world) tick() {
	w.t.Helper()
	if err := w.sch.Tick(context.Background()); err != nil {
		w.t.Fatalf("tick: %v", err)
	}
}

func (w *world) fired() []*core.RoutineFired {
	var out []*core.RoutineFired
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRoutineFired {
			p, err := core.Decode[*core.RoutineFired](c)
			if err != nil {
				w.t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// routineID reads the id from the bot's "Routine rXXXX armed" reply.
func routineID(t *testing.T, reply string) string {
	t.Helper()
	_, rest, ok := strings.Cut(reply, "Routine ")
	id, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(id, "r") {
		t.Fatalf("no routine id in reply %q", reply)
	}
	return id
}
