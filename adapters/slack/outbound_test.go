package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

func scopeIn(f *slackfake.Server, ch, thread string) core.Scope {
	return core.Scope{Platform: "slack", Workspace: f.Config().TeamID, Channel: ch, Thread: thread}
}

func metaKey(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var m struct {
		EventType    string         `json:"event_type"`
		EventPayload map[string]any `json:"event_payload"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("metadata %s: %v", raw, err)
	}
	if m.EventType != metaEventType {
		t.Fatalf("metadata event_type = %q", m.EventType)
	}
	k, _ := m.EventPayload["key"].(string)
	return k
}

func TestPostInThreadWithKeyIsIdempotent(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "question")
	out := core.Outbound{Key: "run1/answer", Scope: scopeIn(f, chPublic, root), Text: "the answer", Priority: core.PriorityHigh}

	ref, err := a.Post(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	posts := f.Posts()
	if len(posts) != 1 || posts[0].ThreadTS != root || posts[0].Text != "the answer" || posts[0].TS != ref.ID {
		t.Fatalf("posts = %+v, ref = %+v", posts, ref)
	}
	if k := metaKey(t, posts[0].Metadata); k != "run1/answer" {
		t.Fatalf("metadata key = %q", k)
	}
	if ref.Scope.Channel != chPublic || ref.Scope.Thread != root || ref.At.IsZero() {
		t.Fatalf("ref = %+v", ref)
	}
	// Same key again, sequentially and concurrently: no new post, same ref.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			r, err := a.Post(ctx, out)
			if err != nil || r.ID != ref.ID {
				t.Errorf("repeat post = %+v, %v", r, err)
			}
		})
	}
	wg.Wait()
	if n := len(f.Posts()); n != 1 {
		t.Fatalf("%d posts, want 1", n)
	}
}

func TestConcurrentFirstPostsSameKeyPostOnce(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	var wg sync.WaitGroup
	refs := make([]core.MessageRef, 8)
	for i := range refs {
		wg.Go(func() {
			var err error
			refs[i], err = a.Post(context.Background(), core.Outbound{Key: "same", Scope: scopeIn(f, chPublic, ""), Text: "once"})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(f.Posts()); n != 1 {
		t.Fatalf("%d posts for one key, want 1", n)
	}
	for _, r := range refs {
		if r.ID != refs[0].ID {
			t.Fatalf("refs differ: %+v", refs)
		}
	}
}

// slack-go is not configured to retry: a 429 or a lost response is one HTTP
// call from the SDK's side.
func TestSDKDoesNotRetryPostMessage(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	f.RateLimit("chat.postMessage", 1, time.Second)
	_, _, err := a.api.PostMessageContext(context.Background(), chPublic, slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("err = %v, want RateLimitedError(1s)", err)
	}
	f.LoseResponses("chat.postMessage", 1)
	if _, _, err := a.api.PostMessageContext(context.Background(), chPublic, slack.MsgOptionText("y", false)); err == nil {
		t.Fatal("lost response did not surface as an error")
	}
	if n := f.CallCount("chat.postMessage"); n != 2 {
		t.Fatalf("SDK made %d chat.postMessage calls for 2 requests", n)
	}
	if n := len(f.Posts()); n != 1 {
		t.Fatalf("%d posts", n)
	}
}

// A post whose response is lost is found by its metadata key and not sent
// again — in a thread (conversations.replies) and at top level
// (conversations.history).
func TestLostResponseFoundByMetadataNotReposted(t *testing.T) {
	for _, threaded := range []bool{true, false} {
		t.Run(fmt.Sprintf("threaded=%v", threaded), func(t *testing.T) {
			f := newFake(t)
			a, logs := newAdapter(t, testConfig(f, ModeSocket))
			thread := ""
			if threaded {
				thread = f.AddMessage(chPublic, "", alice, "q")
			}
			f.LoseResponses("chat.postMessage", 1)
			ref, err := a.Post(context.Background(), core.Outbound{Key: "run9/final", Scope: scopeIn(f, chPublic, thread), Text: "final answer", Priority: core.PriorityHigh})
			if err != nil {
				t.Fatal(err)
			}
			posts := f.Posts()
			if len(posts) != 1 || posts[0].TS != ref.ID {
				t.Fatalf("posts = %d (ref %s), want exactly the one lost-response post", len(posts), ref.ID)
			}
			method := "conversations.history"
			if threaded {
				method = "conversations.replies"
			}
			if f.CallCount(method) != 1 {
				t.Fatalf("%s called %d times", method, f.CallCount(method))
			}
			if strings.Contains(logs.String(), "final answer") {
				t.Fatal("post text in logs")
			}
			// And the key is now recorded.
			if _, err := a.Post(context.Background(), core.Outbound{Key: "run9/final", Scope: scopeIn(f, chPublic, thread), Text: "final answer"}); err != nil || len(f.Posts()) != 1 {
				t.Fatalf("repeat: %v, %d posts", err, len(f.Posts()))
			}
		})
	}
}

// A lost response whose post did not land (the connection died before
// Slack got it) is retried after the check.
func TestInDoubtPostNotFoundIsRetried(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	root := f.AddMessage(chPublic, "", alice, "q")
	var calls int
	a.api = slack.New("xoxb-test-token", slack.OptionAPIURL(f.APIURL()), slack.OptionHTTPClient(doerFunc(func(req *httpReq) (*httpResp, error) {
		if strings.HasSuffix(req.URL.Path, "chat.postMessage") {
			calls++
			if calls == 1 {
				return nil, errors.New("connection reset by peer") // never reached Slack
			}
		}
		return defaultDo(req)
	})))
	ref, err := a.Post(context.Background(), core.Outbound{Key: "k", Scope: scopeIn(f, chPublic, root), Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if posts := f.Posts(); len(posts) != 1 || posts[0].TS != ref.ID || calls != 2 {
		t.Fatalf("posts %d, calls %d", len(posts), calls)
	}
	if f.CallCount("conversations.replies") != 1 {
		t.Fatalf("no check before the retry")
	}
}

// 429 storm: every post eventually lands, in order, once; the wait follows
// Retry-After.
func TestRateLimitStormPostsInOrderNoDuplicates(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	root := f.AddMessage(chPublic, "", alice, "q")
	f.RateLimit("chat.postMessage", 3, time.Second)

	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = a.Post(context.Background(), core.Outbound{
				Key: fmt.Sprintf("p%d", i), Scope: scopeIn(f, chPublic, root), Text: fmt.Sprintf("part %d", i), Priority: core.PriorityHigh,
			})
		})
		time.Sleep(20 * time.Millisecond) // enqueue in order
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	posts := f.Posts()
	if len(posts) != n {
		t.Fatalf("%d posts, want %d", len(posts), n)
	}
	for i, p := range posts {
		if p.Text != fmt.Sprintf("part %d", i) {
			t.Fatalf("post %d is %q: out of order", i, p.Text)
		}
	}
	// Retry-After honoured: after each 429, the next call waits ≥ 1 s.
	calls := f.Calls()
	for i := 0; i+1 < len(calls); i++ {
		if calls[i].Method == "chat.postMessage" && calls[i].Status == 429 {
			if gap := calls[i+1].At.Sub(calls[i].At); gap < 950*time.Millisecond {
				t.Fatalf("call after a 429 came %v later, want ≥ Retry-After", gap)
			}
		}
	}
}

// While a channel waits out a 429, a final answer queued later overtakes
// queued checklist edits, and the edits to one message coalesce to the last.
func TestPriorityOvertakesEditsAndEditsCoalesce(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "q")
	check, err := a.Post(ctx, core.Outbound{Key: "check", Scope: scopeIn(f, chPublic, root), Text: "☐ step 1", Priority: core.PriorityNormal})
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimit("chat.update", 1, time.Second)

	var wg sync.WaitGroup
	editErrs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			editErrs[i] = a.Update(ctx, check, core.Outbound{Scope: check.Scope, Text: fmt.Sprintf("☑ step %d", i+1), Priority: core.PriorityEdit})
		})
		time.Sleep(50 * time.Millisecond)
	}
	var finalErr error
	wg.Go(func() {
		_, finalErr = a.Post(ctx, core.Outbound{Key: "final", Scope: scopeIn(f, chPublic, root), Text: "done!", Priority: core.PriorityHigh})
	})
	wg.Wait()
	for i, err := range append(editErrs, finalErr) {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	var order []string
	for _, c := range f.Calls() {
		if c.Method == "chat.update" || c.Method == "chat.postMessage" {
			order = append(order, fmt.Sprintf("%s:%d", c.Method, c.Status))
		}
	}
	want := []string{"chat.postMessage:200", "chat.update:429", "chat.postMessage:200", "chat.update:200"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("call order = %v, want %v", order, want)
	}
	ups := f.Updates()
	if len(ups) != 1 || ups[0].Text != "☑ step 3" {
		t.Fatalf("updates = %+v, want one, with the latest text", ups)
	}
}

func TestLongAnswerSplitIntoThreadPosts(t *testing.T) {
	f := newFake(t)
	cfg := testConfig(f, ModeSocket)
	cfg.MaxMessageChars = 400
	a, _ := newAdapter(t, cfg)
	root := f.AddMessage(chPublic, "", alice, "q")
	var b strings.Builder
	b.WriteString("Here is the plan.\n\n")
	b.WriteString("```go\n")
	for i := range 30 {
		fmt.Fprintf(&b, "fmt.Println(%d) // line of code\n", i)
	}
	b.WriteString("```\n\nThat is all.")
	ref, err := a.Post(context.Background(), core.Outbound{Key: "long", Scope: scopeIn(f, chPublic, root), Text: b.String(), Priority: core.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	posts := f.Posts()
	if len(posts) < 3 || posts[0].TS != ref.ID {
		t.Fatalf("%d posts (ref %s)", len(posts), ref.ID)
	}
	for i, p := range posts {
		if p.ThreadTS != root {
			t.Errorf("part %d not in the thread", i)
		}
		if n := len([]rune(p.Text)); n > 400 {
			t.Errorf("part %d has %d chars", i, n)
		}
		if strings.Count(p.Text, "```")%2 != 0 {
			t.Errorf("part %d has an unbalanced fence:\n%s", i, p.Text)
		}
		want := "long"
		if i > 0 {
			want = fmt.Sprintf("long#%d", i)
		}
		if k := metaKey(t, p.Metadata); k != want {
			t.Errorf("part %d key %q, want %q", i, k, want)
		}
	}
	if !strings.HasPrefix(posts[1].Text, "```go\n") {
		t.Errorf("second part does not reopen the go fence:\n%s", posts[1].Text)
	}
	// Repeating the post (e.g. after a crash mid-way) sends nothing new.
	if _, err := a.Post(context.Background(), core.Outbound{Key: "long", Scope: scopeIn(f, chPublic, root), Text: b.String()}); err != nil || len(f.Posts()) != len(posts) {
		t.Fatalf("repeat: %v, %d posts", err, len(f.Posts()))
	}
}

func TestCardPostClickResolve(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)
	ctx := context.Background()
	root := f.AddMessage(chPublic, "", alice, "deploy please")
	card := &core.Card{
		ID: "appr-1", Title: "Deploy to production?", Body: "Requested by <@" + alice + ">",
		Fields:  []core.CardField{{Label: "Service", Value: "api"}, {Label: "Version", Value: "1.2.3"}},
		Actions: []core.CardAction{{ID: "approve", Label: "Approve", Token: "t.approve", Style: "primary"}, {ID: "decline", Label: "Decline", Token: "t.decline", Style: "danger"}},
	}
	ref, err := a.Post(ctx, core.Outbound{Key: "card1", Scope: scopeIn(f, chPublic, root), Card: card, Priority: core.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := f.Message(chPublic, ref.ID)
	var blocks []map[string]any
	if err := json.Unmarshal(msg.Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	var buttons []any
	for _, b := range blocks {
		if b["type"] == "actions" {
			if b["block_id"] != "appr-1" {
				t.Errorf("actions block_id = %v", b["block_id"])
			}
			buttons = b["elements"].([]any)
		}
	}
	if len(buttons) != 2 {
		t.Fatalf("blocks = %s", msg.Blocks)
	}
	btn := buttons[0].(map[string]any)
	// The click on that button comes back as a CardClick.
	id := f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: chPublic, MessageTS: ref.ID, ThreadTS: root, User: bob, UserName: "bob",
		BlockID: "appr-1", ActionID: btn["action_id"].(string), Value: btn["value"].(string), Label: "Approve",
	}))
	f.WaitEventAcked(id, 3*time.Second)
	clicks := rec.clicks()
	if len(clicks) != 1 || clicks[0].Token != "t.approve" || clicks[0].Action != "approve" || clicks[0].Card != "appr-1" {
		t.Fatalf("clicks = %+v", clicks)
	}
	// Resolve: update in place, no buttons, the resolution shown.
	card.Resolution = "Approved by bob at 10:02"
	if err := a.Update(ctx, ref, core.Outbound{Scope: ref.Scope, Card: card, Priority: core.PriorityHigh}); err != nil {
		t.Fatal(err)
	}
	msg, _ = f.Message(chPublic, ref.ID)
	if strings.Contains(string(msg.Blocks), `"actions"`) || !strings.Contains(string(msg.Blocks), "Approved by bob") {
		t.Fatalf("resolved card blocks = %s", msg.Blocks)
	}
}

func TestReactOpenDMHistory(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := context.Background()
	if _, err := a.Self(ctx); err != nil {
		t.Fatal(err)
	}
	root := f.AddMessage(chPublic, "", alice, botMention(f)+" what's up")
	ref := core.MessageRef{Scope: scopeIn(f, chPublic, ""), ID: root}
	if err := a.React(ctx, ref, ":eyes:"); err != nil {
		t.Fatal(err)
	}
	if err := a.React(ctx, ref, "eyes"); err != nil {
		t.Fatalf("second identical reaction: %v", err)
	}
	if r := f.Reactions(); len(r) != 1 || r[0] != (slackfake.Reaction{Channel: chPublic, TS: root, Name: "eyes"}) {
		t.Fatalf("reactions = %+v", r)
	}

	dm, err := a.OpenDM(ctx, alice)
	if err != nil || dm.Platform != "slack" || !strings.HasPrefix(dm.Channel, "D") || dm.Thread != "" || dm.Workspace != f.Config().TeamID {
		t.Fatalf("OpenDM = %+v, %v", dm, err)
	}

	f.AddMessage(chPublic, root, bob, "same question")
	if _, err := a.Post(ctx, core.Outbound{Key: "h1", Scope: scopeIn(f, chPublic, root), Text: "answer"}); err != nil {
		t.Fatal(err)
	}
	evs, err := a.History(ctx, scopeIn(f, chPublic, root), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].MessageID != root || evs[0].Scope.Thread != "" || evs[1].Author.ID != bob || evs[1].Scope.Thread != root || !evs[2].Author.IsBot {
		t.Fatalf("history = %+v", evs)
	}
	if !evs[0].MentionsBot || evs[0].Text != "what's up" || evs[0].Visibility != core.Public {
		t.Fatalf("history root = %+v", evs[0])
	}
	last, err := a.History(ctx, scopeIn(f, chPublic, root), 2)
	if err != nil || len(last) != 2 || last[1].MessageID != evs[2].MessageID {
		t.Fatalf("limited history = %+v, %v", last, err)
	}
}

func TestSelfAndLookalikes(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) {
		c.BotHandle = "teammate"
		c.BotName = "Teammate"
		c.Users = []slackfake.User{
			{ID: alice, Name: "alice", RealName: "Alice"},
			{ID: "U0IMPOST01", Name: "teammate.real", RealName: "Someone", DisplayName: "Teammate"},
			{ID: "U0GONE0001", Name: "teammate", Deleted: true},
		}
	})
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	id, err := a.Self(context.Background())
	if err != nil || id.UserID != f.Config().BotUserID || id.Handle != "teammate" {
		t.Fatalf("Self = %+v, %v", id, err)
	}
	if a.TeamID() != f.Config().TeamID {
		t.Fatalf("team = %q", a.TeamID())
	}
	found, err := a.CheckLookalikes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].UserID != "U0IMPOST01" {
		t.Fatalf("look-alikes = %+v", found)
	}
	if !strings.Contains(logs.String(), "U0IMPOST01") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

// A post that landed just before the process died (before the engine could
// journal message.posted) is not sent again by the next process when the
// engine says the post is resumed: the new ledger is empty, but the
// message's metadata key is on Slack.
func TestResumedPostFoundAfterRestartNotReposted(t *testing.T) {
	for _, threaded := range []bool{true, false} {
		t.Run(fmt.Sprintf("threaded=%v", threaded), func(t *testing.T) {
			f := newFake(t)
			thread := ""
			if threaded {
				thread = f.AddMessage(chPublic, "", alice, "q")
			}
			out := core.Outbound{Key: "fxrun7answer", Scope: scopeIn(f, chPublic, thread), Text: "final answer", Priority: core.PriorityHigh}
			before, _ := newAdapter(t, testConfig(f, ModeSocket))
			if _, err := before.Post(context.Background(), out); err != nil {
				t.Fatal(err)
			}
			// The process dies here. Its successor resumes the run.
			after, _ := newAdapter(t, testConfig(f, ModeSocket))
			out.Resumed = true
			ref, err := after.Post(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			if posts := f.Posts(); len(posts) != 1 || posts[0].TS != ref.ID {
				t.Fatalf("posts after the restart = %d, want the original only (ref %s)", len(posts), ref.ID)
			}
			// A resumed post that never landed is posted once.
			fresh := core.Outbound{Key: "fxrun7other", Scope: out.Scope, Text: "other", Resumed: true}
			if _, err := after.Post(context.Background(), fresh); err != nil || len(f.Posts()) != 2 {
				t.Fatalf("resumed new post: %v, %d posts", err, len(f.Posts()))
			}
		})
	}
}
