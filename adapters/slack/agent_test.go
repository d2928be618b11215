package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

func agentFake(t *testing.T, scopes ...string) *slackfake.Server {
	return newFake(t, func(c *slackfake.Config) { c.Scopes = append(RequiredScopes(), scopes...) })
}

// A new process (a fresh adapter) resuming a stream finds the message the
// dead one started instead of starting a second, and appends only the
// part of the answer it lacks; stopping it twice is one stop.
func TestStreamResumedByAnotherProcessAppendsOnlyWhatIsMissing(t *testing.T) {
	f := agentFake(t, AgentScope)
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "question")
	scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}
	first, _ := newAdapter(t, testConfig(f, ModeSocket), WithStreamChunk(10))
	if !first.Streams(ctx, scope) {
		t.Fatal("the agent surface is off with assistant:write granted")
	}
	out := core.Outbound{Key: "k-check", Scope: scope}
	ref, err := first.StartStream(ctx, out, core.StreamUpdate{Title: "Working", Recipient: alice})
	if err != nil {
		t.Fatal(err)
	}
	answer := "one two three four five six seven eight"
	// The first process streams part of the answer and dies.
	if err := first.AppendStream(ctx, ref, core.StreamUpdate{Title: "Working", Text: answer[:14]}); err != nil {
		t.Fatal(err)
	}

	second, _ := newAdapter(t, testConfig(f, ModeSocket), WithStreamChunk(10))
	out.Resumed = true
	again, err := second.StartStream(ctx, out, core.StreamUpdate{Title: "Working", Recipient: alice})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != ref.ID {
		t.Fatalf("resumed start gave %s, want the started stream %s", again.ID, ref.ID)
	}
	u := core.StreamUpdate{Key: "k-answer", Title: "Done", Text: answer, Resumed: true}
	if err := second.AppendStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	if err := second.StopStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	// A third process repeats the whole answer and the stop: no-ops.
	third, _ := newAdapter(t, testConfig(f, ModeSocket), WithStreamChunk(10))
	if err := third.AppendStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	if err := third.StopStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	ss := f.Streams()
	if len(ss) != 1 {
		t.Fatalf("%d streams, want 1", len(ss))
	}
	if ss[0].Text != answer || !ss[0].Stopped || ss[0].Plan != "Done" {
		t.Fatalf("stream holds %q (stopped %v, plan %q), want the answer once, stopped, done", ss[0].Text, ss[0].Stopped, ss[0].Plan)
	}
	if n := f.CallCount("chat.startStream"); n != 1 {
		t.Fatalf("%d chat.startStream calls, want 1", n)
	}
	if n := f.CallCount("chat.stopStream"); n != 1 {
		t.Fatalf("%d chat.stopStream calls, want 1 (the repeat knows it is stopped)", n)
	}
	for _, c := range ss[0].Calls {
		if len([]rune(c.Text)) > 10 {
			t.Fatalf("an append carried %q, more than the 10-character chunk", c.Text)
		}
	}
}

// The answer's pieces go out one per pace interval, however fast they
// could: a long answer never bursts into Slack's limits.
func TestStreamPiecesArePaced(t *testing.T) {
	f := agentFake(t, AgentScope)
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "question")
	scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}
	const pace = 150 * time.Millisecond
	a, _ := newAdapter(t, testConfig(f, ModeSocket), WithStreamChunk(20), WithChannelPace(pace, 4))
	ref, err := a.StartStream(ctx, core.Outbound{Key: "k", Scope: scope}, core.StreamUpdate{Recipient: alice})
	if err != nil {
		t.Fatal(err)
	}
	answer := strings.Repeat("word ", 40) // 200 characters: ten pieces
	if err := a.AppendStream(ctx, ref, core.StreamUpdate{Text: answer}); err != nil {
		t.Fatal(err)
	}
	var prev time.Time
	pieces := 0
	for _, c := range f.Streams()[0].Calls {
		if c.Text == "" {
			continue
		}
		pieces++
		if !prev.IsZero() && c.At.Sub(prev) < pace-10*time.Millisecond {
			t.Fatalf("pieces %s apart, want at least %s", c.At.Sub(prev), pace)
		}
		prev = c.At
	}
	if pieces < 10 || f.Streams()[0].Text != answer {
		t.Fatalf("%d pieces, text %q", pieces, f.Streams()[0].Text)
	}
}

// Without assistant:write nothing streams, the status is never set, and
// doctor says how to turn the surface on; with it, doctor says it is on.
func TestAgentSurfaceDetectedFromScopes(t *testing.T) {
	ctx := context.Background()
	scope := core.Scope{Platform: Platform, Channel: chPublic, Thread: "1.000001"}
	for _, tc := range []struct {
		scopes []string
		on     bool
		detail string
	}{
		{nil, false, "off (no assistant:write scope)"},
		{[]string{AgentScope}, true, "on (assistant:write granted)"},
	} {
		f := agentFake(t, tc.scopes...)
		a, _ := newAdapter(t, testConfig(f, ModeSocket))
		if got := a.Streams(ctx, scope); got != tc.on {
			t.Fatalf("scopes %v: Streams = %v, want %v", tc.scopes, got, tc.on)
		}
		if err := a.Typing(ctx, scope); err != nil {
			t.Fatal(err)
		}
		if n := len(f.Statuses()); (n > 0) != tc.on {
			t.Fatalf("scopes %v: %d status calls", tc.scopes, n)
		}
		var found bool
		for _, c := range a.Doctor(ctx) {
			if c.Name == "slack agent surface" {
				found = strings.HasPrefix(c.Detail, tc.detail) && c.Status == core.CheckOK
			}
		}
		if !found {
			t.Fatalf("scopes %v: doctor does not say %q: %+v", tc.scopes, tc.detail, a.Doctor(ctx))
		}
	}
	if a, _ := newAdapter(t, testConfig(agentFake(t, AgentScope), ModeSocket)); a.Streams(ctx, core.Scope{Platform: Platform, Channel: chPublic}) {
		t.Fatal("a stream without a thread")
	}
}

// Opening the assistant panel titles the thread and suggests prompts from
// what waits for the person (decisions, their routine's report, their
// pending requests), at most four; without the agent surface
// the event is acknowledged and nothing is called.
func TestAssistantThreadStartedSuggestsPrompts(t *testing.T) {
	for _, on := range []bool{true, false} {
		var scopes []string
		if on {
			scopes = []string{AgentScope}
		}
		f := agentFake(t, scopes...)
		a, _ := newAdapter(t, testConfig(f, ModeSocket))
		a.SetPanelHints(func(_ context.Context, user string) (core.PanelHints, error) {
			if user != alice {
				t.Errorf("hints read for %s", user)
			}
			return core.PanelHints{Decisions: 2, Reports: 3, Report: "⏭️ Routine r1 skipped its slot", Asked: 1}, nil
		})
		rec := &recorder{}
		run(t, a, rec.deliver)
		if !f.WaitConnected(5 * time.Second) {
			t.Fatal("no connection")
		}
		id := f.PushEvent(f.AssistantThreadStartedEvent(alice, chDM, "1700000000.000100", chPublic))
		if !f.WaitEventAcked(id, 5*time.Second) {
			t.Fatal("assistant_thread_started not acknowledged")
		}
		if on {
			waitUntil(t, 5*time.Second, "suggested prompts", func() bool { return len(f.SuggestedPrompts()) > 0 })
		}
		ps := f.SuggestedPrompts()
		if !on {
			if len(ps) != 0 || len(f.Titles()) != 0 {
				t.Fatalf("without the agent surface: prompts %+v, titles %+v", ps, f.Titles())
			}
			continue
		}
		if len(ps) != 1 || ps[0].ThreadTS != "1700000000.000100" || ps[0].Channel != chDM {
			t.Fatalf("prompts %+v, want one set in the panel's thread", ps)
		}
		want := []struct{ title, message string }{
			{"2 waiting for your decision", "inbox"},
			{"Routine r1 skipped its slot", "inbox"},
			{"requests waiting for approval (1)", "what do you know about me"},
			{"without a model", "help"},
		}
		if got := ps[0].Prompts; len(got) != len(want) {
			t.Fatalf("prompts %v, want %d", got, len(want))
		}
		for i, w := range want {
			if got := ps[0].Prompts[i]; got["message"] != w.message || !strings.Contains(got["title"], w.title) {
				t.Errorf("prompt %d = %v, want %q → %q", i, got, w.title, w.message)
			}
		}
		if ts := f.Titles(); len(ts) != 1 || ts[0].Title != assistantTitle {
			t.Fatalf("titles %+v", ts)
		}
		if n := rec.callCount(); n != 0 {
			t.Fatalf("the panel's opening was delivered to the engine %d times", n)
		}
	}
}

// With nothing waiting the panel still offers the commands that work in
// a DM, the inbox first.
func TestAssistantPromptsWithoutContext(t *testing.T) {
	ps := assistantPrompts(core.PanelHints{})
	if len(ps) != maxPrompts || ps[0].Message != "inbox" || ps[1].Message != "help" {
		t.Fatalf("prompts %+v", ps)
	}
	for _, p := range ps {
		if strings.Contains(p.Title, "waiting") {
			t.Errorf("prompt %q claims something waits", p.Title)
		}
	}
}

// A resumed run whose answer is not what a dead process had streamed
// (the model was asked again) ends with the one message holding exactly
// the new answer, in place: no second message, the key in its metadata.
func TestStreamStoppedWithAnotherAnswerHoldsExactlyIt(t *testing.T) {
	f := agentFake(t, AgentScope)
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "is the build green?")
	scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}
	first, _ := newAdapter(t, testConfig(f, ModeSocket))
	out := core.Outbound{Key: "k-check", Scope: scope}
	ref, err := first.StartStream(ctx, out, core.StreamUpdate{Title: "Working", Recipient: alice})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.AppendStream(ctx, ref, core.StreamUpdate{Title: "Working", Text: "I think the build fa"}); err != nil {
		t.Fatal(err)
	}
	// Another process resumes, and the model answers otherwise.
	second, _ := newAdapter(t, testConfig(f, ModeSocket))
	out.Resumed = true
	again, err := second.StartStream(ctx, out, core.StreamUpdate{Title: "Working", Recipient: alice})
	if err != nil || again.ID != ref.ID {
		t.Fatalf("resumed start: %v %v, want %s", again, err, ref.ID)
	}
	const answer = "The build is green: 214 checks passed."
	u := core.StreamUpdate{Key: "k-answer", Title: "Done", Text: answer, Resumed: true}
	if err := second.AppendStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	if err := second.StopStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	m, ok := f.Message(chPublic, ref.ID)
	if !ok || m.Text != answer {
		t.Fatalf("the stopped stream holds %q, want exactly %q", m.Text, answer)
	}
	if md := string(m.Metadata); !strings.Contains(md, metaEventType) || !strings.Contains(md, "k-answer") {
		t.Errorf("metadata %s, want the answer's key", md)
	}
	if n := f.CallCount("chat.startStream"); n != 1 {
		t.Errorf("%d chat.startStream calls, want 1", n)
	}
	if n := f.CallCount("chat.postMessage"); n != 0 {
		t.Errorf("%d chat.postMessage calls, want none", n)
	}
	// Stopping again changes nothing more.
	updates := f.CallCount("chat.update")
	if err := second.StopStream(ctx, again, u); err != nil {
		t.Fatal(err)
	}
	if n := f.CallCount("chat.update"); n != updates || updates != 1 {
		t.Errorf("chat.update calls %d then %d, want 1 and no more", updates, n)
	}
}

// A run whose model call was cut mid-answer and that then failed stops
// its stream without an answer: the cut text would stay as if it were one.
// The stopped stream holds the plan's title instead; a stream that had
// streamed no text is left alone.
func TestStreamStoppedWithoutAnAnswerDropsTheCutText(t *testing.T) {
	for _, tc := range []struct {
		name     string
		streamed string
		updates  int
	}{
		{"cut text", "I think the build fa", 1},
		{"nothing streamed", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := agentFake(t, AgentScope)
			ctx := context.Background()
			root := f.AddMessage(chPublic, "", alice, "is the build green?")
			scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}
			a, _ := newAdapter(t, testConfig(f, ModeSocket))
			ref, err := a.StartStream(ctx, core.Outbound{Key: "k-check", Scope: scope}, core.StreamUpdate{Title: "Working", Recipient: alice})
			if err != nil {
				t.Fatal(err)
			}
			if tc.streamed != "" {
				if err := a.AppendStream(ctx, ref, core.StreamUpdate{Title: "Working", Text: tc.streamed}); err != nil {
					t.Fatal(err)
				}
			}
			const title = "❌ Failed — the model provider is down"
			if err := a.StopStream(ctx, ref, core.StreamUpdate{Key: "k-check", Title: title}); err != nil {
				t.Fatal(err)
			}
			m, ok := f.Message(chPublic, ref.ID)
			if !ok {
				t.Fatal("the stream's message is gone")
			}
			if tc.streamed != "" && m.Text != title {
				t.Fatalf("the stopped stream holds %q, want the plan's title %q", m.Text, title)
			}
			if n := f.CallCount("chat.update"); n != tc.updates {
				t.Errorf("%d chat.update calls, want %d", n, tc.updates)
			}
		})
	}
}

// A process that died while the thread showed "is thinking…" leaves the
// status to the next one: a fresh adapter stopping the resumed stream
// clears it, though nothing asked it about the agent surface yet (a
// resumed run stops its stream without asking: the decision is journaled;
// Run reads the scopes concurrently, and may not have got that far).
func TestResumedStopClearsTheThinkingStatus(t *testing.T) {
	f := agentFake(t, AgentScope)
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "question")
	scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}
	first, _ := newAdapter(t, testConfig(f, ModeSocket))
	if err := first.Typing(ctx, scope); err != nil {
		t.Fatal(err)
	}
	ref, err := first.StartStream(ctx, core.Outbound{Key: "k-check", Scope: scope}, core.StreamUpdate{Title: "Working", Recipient: alice})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := newAdapter(t, testConfig(f, ModeSocket))
	if err := second.StopStream(ctx, ref, core.StreamUpdate{Key: "k-answer", Title: "Done", Text: "the answer", Resumed: true}); err != nil {
		t.Fatal(err)
	}
	st := f.Statuses()
	if len(st) == 0 || st[len(st)-1].Status != "" || st[len(st)-1].ThreadTS != root {
		t.Fatalf("statuses %+v: the thread still shows %q", st, thinkingStatus)
	}
}
