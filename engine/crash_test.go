package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
)

// crashWorld is what survives a crash: the journal's storage, the platform
// (the surface, which dedupes by idempotency key), the memory store, the
// tools' external effects and the model provider.
type crashWorld struct {
	signer *core.Signer
	j      *coretest.MemJournal
	s      *coretest.FakeSurface
	mem    *coretest.Memory
	tm     *turnMemory // mem, recalling for each turn
	m      *coretest.ScriptedModel
	tools  []core.Tool
	clk    *clock
	b      *core.Boundary
}

func (w *crashWorld) engine(t *testing.T, j core.Journal) *engine.Engine {
	t.Helper()
	reg, err := gate.NewRegistry(w.tools...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: w.b, Model: w.m, Tools: reg,
		// Bob, who clicks the cards, is a workspace admin: with no
		// approvers listed, admins decide irreversible actions.
		Surfaces: map[string]core.Surface{platform: adminSurface{FakeSurface: w.s, admins: map[string]bool{bob.ID: true}}},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			return true, "mention", nil
		}),
		Memory: w.tm.For, Clock: w.clk.Now, CardKey: cardKey, RetryBackoff: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func waitIdle(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.WaitIdle(ctx); err != nil {
		t.Fatalf("engine not idle: %v", err)
	}
}

// scenario drives one conversation on an engine: deliver the trigger and,
// when a card is up and undecided, click it. It tolerates a crashed engine.
type scenario struct {
	name  string
	tools func(log *toolLog) []core.Tool
	model func() *coretest.ScriptedModel
	text  string
	seed  []string // notes in C1's memory before the run
	click bool     // approve the card (as Bob) once it is posted
	// slow makes each model call take 5 s by the engine's clock: a
	// one-step answer that shows a checklist (it did not answer in 3 s).
	slow bool
	// endsAs is how the checklist ends ("✅ Done" when empty).
	endsAs string
	// check inspects the world after recovery.
	check func(t *testing.T, w *crashWorld, log *toolLog)
}

func crashScenarios() []scenario {
	return []scenario{{
		name: "multi-step with posts",
		tools: func(log *toolLog) []core.Tool {
			return []core.Tool{noteTool(log), lookupTool("some page text"), sendTool(log), replyTool()}
		},
		model: func() *coretest.ScriptedModel {
			return coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("a", "note", `{"text":"x"}`), coretest.Call("b", "lookup", `{}`)),
				coretest.Calls(coretest.Call("c", "send_to", `{"channel":"#general","text":"hello general"}`)),
				coretest.Calls(coretest.Call("d", "reply", `{"text":"the answer"}`)),
				coretest.Text("the answer"),
			)
		},
		text: "please post hello to #general",
		check: func(t *testing.T, w *crashWorld, log *toolLog) {
			wantPosts(t, w, "⏳", "hello general", "the answer")
		},
	}, {
		name: "irreversible with approval",
		tools: func(log *toolLog) []core.Tool {
			return []core.Tool{wipeTool(log)}
		},
		model: func() *coretest.ScriptedModel {
			return coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("a", "wipe", `{"id":"42"}`)),
				coretest.Text("finished"),
			)
		},
		text:  "wipe record 42",
		click: true,
		check: func(t *testing.T, w *crashWorld, log *toolLog) {
			wantPosts(t, w, "⏳", "🔐 Approval needed", "finished")
			// At most once: a crash mid-execution is reported, never retried.
			if n := len(log.get()); n > 1 {
				t.Errorf("irreversible tool executed %d times", n)
			}
		},
	}, {
		name: "recalled notes",
		tools: func(log *toolLog) []core.Tool {
			return []core.Tool{noteTool(log), replyTool()}
		},
		model: func() *coretest.ScriptedModel {
			return coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("a", "note", `{"text":"x"}`)),
				coretest.Calls(coretest.Call("b", "reply", `{"text":"the answer"}`)),
				coretest.Text("the answer"),
			)
		},
		seed: []string{"Posts to general need a greeting.", "Only wipe record 42 after a backup."},
		check: func(t *testing.T, w *crashWorld, log *toolLog) {
			wantPosts(t, w, "⏳", "the answer")
			// Every model call, before the crash or after, saw the notes once.
			for i, v := range w.m.Views() {
				if notes := notesIn(v); len(notes) != 1 || !strings.Contains(notes[0].Text, "need a greeting") || !strings.Contains(notes[0].Text, "after a backup") {
					t.Errorf("view %d notes = %+v", i, notes)
				}
			}
			if n := autoRecalls(w); n != 1 {
				t.Errorf("automatic recalls journaled = %d", n)
			}
			cur, _ := w.s.Current(w.s.Posts()[0].Ref.ID)
			if !strings.Contains(cur.Text, "✓ Recalled 2 notes") {
				t.Errorf("checklist = %q", cur.Text)
			}
		},
	}, {
		name:  "quick one-step answer",
		tools: func(log *toolLog) []core.Tool { return nil },
		model: func() *coretest.ScriptedModel { return coretest.NewScriptedModel(coretest.Text("the answer")) },
		check: func(t *testing.T, w *crashWorld, log *toolLog) {
			wantPosts(t, w, "the answer") // no checklist, before a crash or after
		},
	}, {
		name:   "slow one-step answer",
		tools:  func(log *toolLog) []core.Tool { return nil },
		model:  func() *coretest.ScriptedModel { return coretest.NewScriptedModel(coretest.Text("the answer")) },
		slow:   true,
		endsAs: "the answer",
		check: func(t *testing.T, w *crashWorld, log *toolLog) {
			// The checklist lists nothing: it becomes the answer, crash or
			// not, and no empty "✅ Done" is left above it (issue 36).
			wantPosts(t, w, "⏳")
		},
	}}
}

// autoRecalls counts the automatic recalls journaled in C1.
func autoRecalls(w *crashWorld) int {
	n := 0
	for _, c := range w.j.All(chanScope("C1").Key()) {
		if c.Kind() == core.KindToolRequested {
			if p, err := core.Decode[*core.ToolRequested](c); err == nil && len(p.AutoRecall) > 0 {
				n++
			}
		}
	}
	return n
}

// wantPosts checks that the surface holds exactly one post per expected
// text prefix/substring, each with its own idempotency key.
func wantPosts(t *testing.T, w *crashWorld, texts ...string) {
	t.Helper()
	posts := w.s.Posts()
	if len(posts) != len(texts) {
		var got []string
		for _, p := range posts {
			got = append(got, p.Out.Text)
		}
		t.Fatalf("posts = %d %q, want %d", len(posts), got, len(texts))
	}
	keys := map[string]bool{}
	for _, want := range texts {
		n := 0
		for _, p := range posts {
			if strings.Contains(p.Out.Text, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%q posted %d times", want, n)
		}
	}
	for _, p := range posts {
		if p.Out.Key == "" || keys[p.Out.Key] {
			t.Errorf("post %q key %q missing or reused", p.Out.Text, p.Out.Key)
		}
		keys[p.Out.Key] = true
	}
	if w.s.Unkeyed() != 0 {
		t.Errorf("%d posts without an idempotency key", w.s.Unkeyed())
	}
}

// play runs the scenario on e until idle. ok is false when the engine
// refused work (it had crashed).
func (sc scenario) play(t *testing.T, w *crashWorld, e *engine.Engine, ev *core.Event, deliver bool) {
	ctx := context.Background()
	if deliver {
		if err := e.Deliver(ctx, core.Inbound{Event: ev}); err != nil {
			return
		}
	}
	waitIdle(t, e)
	if !sc.click {
		return
	}
	cards := w.s.Cards()
	if len(cards) == 0 {
		return
	}
	if resolved(w) {
		return
	}
	tok := cards[0].Out.Card.Actions[0].Token
	_ = e.Deliver(ctx, core.Inbound{Click: &core.CardClick{Scope: cards[0].Ref.Scope, Token: tok, By: bob}})
	waitIdle(t, e)
}

func resolved(w *crashWorld) bool {
	for _, c := range w.j.All(chanScope("C1").Key()) {
		if c.Kind() == core.KindApprovalResolved {
			return true
		}
	}
	return false
}

// Crash safety: for every N, crash the engine right after its Nth journal
// append, start a fresh engine on the same journal and surface, and check
// that the run completes exactly once and every message is posted exactly
// once (by idempotency key and by count).
func TestCrashAtEveryStep(t *testing.T) {
	for _, sc := range crashScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			// A clean run counts the appends.
			total := func() int {
				w, log := newCrashWorld(t, sc)
				cj := coretest.NewCrashJournal(w.j, 0)
				e := w.engine(t, cj)
				if err := e.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				ev := crashEvent(w)
				sc.play(t, w, e, &ev, true)
				_ = e.Close()
				checkRecovered(t, w, sc, log)
				return cj.Appends()
			}()
			if total < 4 {
				t.Fatalf("scenario too short: %d appends", total)
			}
			reissued := 0
			for n := 1; n <= total; n++ {
				t.Run("crash after append "+itoa(n), func(t *testing.T) {
					w, log := newCrashWorld(t, sc)
					ctx, crash := context.WithCancel(context.Background())
					cj := coretest.NewCrashJournal(w.j, n)
					cj.OnCrash = crash
					e1 := w.engine(t, cj)
					if err := e1.Start(ctx); err != nil {
						t.Fatal(err)
					}
					ev := crashEvent(w)
					sc.play(t, w, e1, &ev, true)
					_ = e1.Close()
					crash()
					// A recall journaled before the crash is reused, not
					// fetched again.
					journaled, recalled := autoRecalls(w) > 0, len(w.tm.recalls())

					// Restart on the same storage, platform and provider.
					e2 := w.engine(t, w.j)
					if err := e2.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
					delivered := false
					for _, c := range w.j.All(chanScope("C1").Key()) {
						delivered = delivered || c.Kind() == core.KindMessageReceived
					}
					// A crash before the message was journaled means the
					// platform redelivers it.
					sc.play(t, w, e2, &ev, !delivered)
					_ = e2.Close()
					checkRecovered(t, w, sc, log)
					if n := len(w.tm.recalls()); journaled && n != recalled {
						t.Errorf("the restart recalled again (%d recalls, %d before) though the recall was journaled", n, recalled)
					}
					for _, p := range w.s.Posts() {
						if w.s.Attempts(p.Out.Key) > 1 {
							reissued++
						}
					}
				})
			}
			// Some crash points fall between a post and its record: the
			// restart must have re-issued those posts (deduplicated by key).
			// A one-step run has too few such points for the engine's
			// asynchronous stop to land on one every time.
			if reissued == 0 && total >= 8 {
				t.Errorf("no crash point exercised a re-issued post")
			}
		})
	}
}

func newCrashWorld(t *testing.T, sc scenario) (*crashWorld, *toolLog) {
	log := &toolLog{}
	w := &crashWorld{signer: coretest.NewSigner(t), s: coretest.NewFakeSurface(platform, botID), mem: coretest.NewMemory(),
		m: sc.model(), clk: &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}}
	w.j = coretest.NewMemJournal(w.signer)
	w.b = core.NewBoundary(w.clk.Now)
	w.tools = sc.tools(log)
	if sc.slow {
		w.m.OnCall = func(context.Context, int, core.View) { w.clk.Advance(5 * time.Second) }
	}
	w.tm = &turnMemory{Memory: w.mem}
	if len(sc.seed) > 0 {
		w.tm.seed(t, "C1", sc.seed...)
	}
	return w, log
}

func crashEvent(w *crashWorld) core.Event {
	return core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> " + "please post hello to #general; wipe record 42", MentionsBot: true, At: w.clk.Now()}
}

func checkRecovered(t *testing.T, w *crashWorld, sc scenario, log *toolLog) {
	t.Helper()
	st, err := fold.Fold(chanScope("C1").Key(), w.j.All(chanScope("C1").Key()))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) != 1 {
		t.Fatalf("runs = %d", len(st.Runs))
	}
	for _, r := range st.Runs {
		if r.Status != core.RunDone {
			t.Fatalf("run status %s (%s)", r.Status, r.Reason)
		}
	}
	if n := st.Counts["run.completed"]; n != 1 {
		t.Errorf("run.completed = %d", n)
	}
	if n := st.Counts["run.started"]; n != 1 {
		t.Errorf("run.started = %d", n)
	}
	if n := autoRecalls(w); n > 1 {
		t.Errorf("automatic recalls journaled = %d", n)
	}
	// Every effect is recorded exactly once.
	seen := map[string]int{}
	for _, ch := range []string{"C1", "general"} {
		for _, c := range w.j.All(chanScope(ch).Key()) {
			if c.Kind() == core.KindMessagePosted {
				p, _ := core.Decode[*core.MessagePosted](c)
				seen[p.EffectID]++
			}
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("effect %s recorded %d times", id, n)
		}
	}
	// Each step's results are on the checklist before the next model call,
	// crash or not: a restart between a step's last tool result and the
	// checklist edit must not leave the checklist behind while the model
	// works on the next step.
	unshown, shown := false, false
	for _, c := range w.j.All(chanScope("C1").Key()) {
		switch c.Kind() {
		case core.KindMessagePosted:
			// Results before the checklist exists show when it is posted.
			p, _ := core.Decode[*core.MessagePosted](c)
			if p.Role == core.RoleChecklist {
				shown, unshown = true, false
			}
		case core.KindToolCompleted:
			unshown = shown
		case core.KindMessageUpdated:
			unshown = false
		case core.KindModelStep:
			if unshown {
				t.Errorf("model.step at seq %d was taken before the checklist showed the previous step's tool results", c.Seq())
			}
		}
	}
	if _, err := core.VerifyChannel(context.Background(), w.j, w.signer.Verifier(), chanScope("C1").Key()); err != nil {
		t.Errorf("verify: %v", err)
	}
	// The checklist, when the run shows one (wantPosts says whether), is
	// its first post and ends in its terminal state.
	for i, p := range w.s.Posts() {
		if !strings.HasPrefix(p.Out.Text, "⏳") {
			continue
		}
		ends := sc.endsAs
		if ends == "" {
			ends = "✅ Done"
		}
		if cur, _ := w.s.Current(p.Ref.ID); i != 0 || !strings.HasPrefix(cur.Text, ends) {
			t.Errorf("checklist (post %d) = %q", i, cur.Text)
		}
	}
	sc.check(t, w, log)
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}
