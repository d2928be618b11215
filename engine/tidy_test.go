package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// sayIn delivers a message in thread root of C1 and returns the bot's
// newest post there that is not a checklist.
func (h *harness) sayIn(p core.Person, root, text string) string {
	h.t.Helper()
	h.deliver(h.inThread(p, "C1", root, text))
	h.idle()
	var last string
	for _, post := range h.s.Posts() {
		if post.Ref.Scope.Thread == root && !strings.HasPrefix(post.Out.Text, "⏳") {
			last = post.Out.Text
		}
	}
	return last
}

func checklistPosts(h *harness) []coretest.Post {
	var out []coretest.Post
	for _, p := range h.s.Posts() {
		if strings.HasPrefix(p.Out.Text, "⏳") {
			out = append(out, p)
		}
	}
	return out
}

// A conversation of quick answers stays a conversation: every message gets
// a reaction and an answer, and no status line.
func TestFollowUpsInAThreadPostOnlyAnswers(t *testing.T) {
	answers := map[string]string{"first question": "one", "and then?": "two", "and after that?": "three"}
	m := coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		last := lastText(v)
		return core.Reply{Text: answers[last[strings.LastIndex(last, ": ")+2:]]}, nil
	})
	h := newHarness(t, m, nil)
	ev := h.mention(alice, "C1", "first question")
	h.deliver(ev)
	h.idle()
	root := ev.MessageID
	var msgs []string
	msgs = append(msgs, ev.MessageID)
	for _, q := range []string{"and then?", "and after that?"} {
		f := h.inThread(bob, "C1", root, q)
		msgs = append(msgs, f.MessageID)
		h.deliver(f)
		h.idle()
	}
	var texts []string
	for _, p := range h.s.Posts() {
		texts = append(texts, p.Out.Text)
	}
	if !slices.Equal(texts, []string{"one", "two", "three"}) {
		t.Errorf("posts = %q, want the three answers only", texts)
	}
	if n := len(h.s.Edits()); n != 0 {
		t.Errorf("edits = %d", n)
	}
	var want []string
	for _, id := range msgs {
		want = append(want, id+":"+core.AckReaction)
	}
	if got := h.s.Reactions(); !slices.Equal(got, want) {
		t.Errorf("reactions = %v, want %v", got, want)
	}
}

// A run that has not answered within the delay shows its checklist while
// the model still works. With nothing listed on it when the answer comes,
// the checklist becomes the answer: no empty "✅ Done" above it (issue 36).
func TestSlowAnswerShowsChecklist(t *testing.T) {
	var h *harness
	m := coretest.NewScriptedModel(coretest.Text("It took a while."))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		h.clk.Advance(time.Second) // the call is slow...
		// ...and the checklist appears while it runs.
		coretest.WaitFor(t, 5*time.Second, "the checklist during the model call", func() bool { return len(checklistPosts(h)) == 1 })
	}
	h = newHarness(t, m, nil, func(c *engine.Config) { c.ChecklistDelay = 50 * time.Millisecond })
	ev := h.mention(alice, "C1", "think hard")
	h.deliver(ev)
	h.idle()
	posts := h.s.Posts()
	if len(posts) != 1 || !strings.HasPrefix(posts[0].Out.Text, "⏳ Working on it…") {
		t.Fatalf("posts = %+v, want the checklist only", posts)
	}
	if cur, _ := h.s.Current(posts[0].Ref.ID); cur.Text != "It took a while." {
		t.Errorf("checklist ends as %q, want the answer", cur.Text)
	}
	if got := h.s.Reactions(); !slices.Equal(got, []string{ev.MessageID + ":" + core.AckReaction}) {
		t.Errorf("reactions = %v", got)
	}
}

// The delay is judged by the engine's clock: a call that is quick by it
// posts no checklist even when the wall-clock timer fires during the call.
func TestQuickAnswerByTheClockPostsNoChecklist(t *testing.T) {
	release := make(chan struct{})
	m := coretest.NewScriptedModel(coretest.Text("quick"))
	m.OnCall = func(ctx context.Context, n int, v core.View) { <-release }
	h := newHarness(t, m, nil, func(c *engine.Config) { c.ChecklistDelay = time.Millisecond })
	h.deliver(h.mention(alice, "C1", "hi"))
	// The timer fires during the call; the test clock has not moved.
	coretest.WaitFor(t, 5*time.Second, "the timer to fire", func() bool {
		return strings.Count(h.logs.String(), "checklist not due yet") >= 2
	})
	close(release)
	h.idle()
	if posts := h.s.Posts(); len(posts) != 1 || posts[0].Out.Text != "quick" {
		t.Errorf("posts = %+v", posts)
	}
}

// A steering message that reaches a live run is acknowledged when the run
// takes it up.
func TestSteeringIsAcknowledged(t *testing.T) {
	var h *harness
	var steer core.Event
	m := coretest.NewScriptedModel(coretest.Text("first"), coretest.Text("second"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if n == 1 {
			h.deliver(steer)
		}
	}
	h = newHarness(t, m, nil)
	ev := h.mention(alice, "C1", "start")
	steer = h.inThread(bob, "C1", ev.MessageID, "also this")
	h.deliver(ev)
	h.idle()
	want := []string{ev.MessageID + ":" + core.AckReaction, steer.MessageID + ":" + core.AckReaction}
	if got := h.s.Reactions(); !slices.Equal(got, want) {
		t.Errorf("reactions = %v, want %v", got, want)
	}
	if n := len(checklistPosts(h)); n != 0 {
		t.Errorf("checklists = %d for a run of two quick answers", n)
	}
}
