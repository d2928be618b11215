package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// cardButtons returns a card's action ids and values by action id.
func cardButtons(t *testing.T, blocks json.RawMessage) map[string]string {
	t.Helper()
	var bs []struct {
		Elements []struct {
			Type     string
			ActionID string `json:"action_id"`
			Value    string
		}
	}
	if err := json.Unmarshal(blocks, &bs); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.Type == "button" {
				out[e.ActionID] = e.Value
			}
		}
	}
	return out
}

func isCard(p slackfake.Post) bool {
	return len(p.Blocks) > 0 && strings.Contains(string(p.Blocks), "approve")
}

// qaApprovalClicks: a non-approver's click, a forged value and a
// replayed click are each refused with a visible reply and nothing runs;
// the approver's click runs the action exactly once.
func qaApprovalClicks(t *testing.T) {
	b := startQA(t, qaOpts{})
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" policy set approvers "+qaBob)
	b.waitPost("policy answer", hasText("Policy updated"))

	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+qaOther+`","text":"cardkiwi report"}`)),
		llmtest.Text("Shared it, cardkiwi done."),
	)
	root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" share the report with the other room")
	card := b.waitPost("approval card", isCard)
	if card.ThreadTS != root {
		t.Fatalf("card posted in %q, want thread %s", card.ThreadTS, root)
	}
	btn := cardButtons(t, card.Blocks)
	approve := btn["approve"]
	click := func(user, action, value string) {
		b.slack.PushInteraction(b.slack.BlockActionsJSON(slackfake.Click{
			Channel: qaGeneral, MessageTS: card.TS, ThreadTS: root, User: user, UserName: user,
			BlockID: "", ActionID: action, Value: value, Label: action,
		}))
	}
	// 1. Alice is not an approver.
	click(qaAlice, "approve", approve)
	// Told privately (chat.postEphemeral), in the card's thread.
	coretest.WaitFor(b.t, 10*time.Second, "a private refusal for a non-approver", func() bool {
		for _, e := range b.slack.Ephemerals() {
			if e.User == qaAlice && e.ThreadTS == root && strings.Contains(e.Text, "still waiting") {
				return true
			}
		}
		return false
	})
	// 2. A forged value (the MAC of another action, or garbage).
	forged := approve[:len(approve)-3] + "AAA"
	click(qaBob, "approve", forged)
	// Refused to Bob alone (ephemeral), never in the channel.
	b.waitEphemeral("refusal of a forged value", func(e slackfake.Ephemeral) bool {
		return e.User == qaBob && e.ThreadTS == root && strings.Contains(e.Text, "could not be verified")
	})
	if n := b.count(hasText("could not be verified")); n != 0 {
		t.Fatalf("the forged-click refusal was posted publicly %d times", n)
	}
	swapped := strings.Replace(btn["decline"], ".d", ".a", 1)
	click(qaBob, "approve", swapped)
	if n := b.count(inChannel(qaOther)); n != 0 {
		t.Fatalf("posted to %s before a valid approval", qaOther)
	}
	// 3. Bob approves: the post happens once, then the run finishes.
	bobClick := b.slack.BlockActionsJSON(slackfake.Click{
		Channel: qaGeneral, MessageTS: card.TS, ThreadTS: root, User: qaBob, UserName: "bob",
		ActionID: "approve", Value: approve, Label: "Approve",
	})
	b.slack.PushInteraction(bobClick)
	b.waitPost("the approved post", func(p slackfake.Post) bool {
		return p.Channel == qaOther && strings.Contains(p.Text, "cardkiwi report")
	})
	b.waitPost("final answer", hasText("cardkiwi done"))
	// 4. The same click replayed byte for byte, a new press of the same
	// button, and a late click by Alice: each refused where people see it.
	refusals := func() int {
		return b.count(func(p slackfake.Post) bool { return p.ThreadTS == root && strings.Contains(p.Text, "already decided") })
	}
	b.slack.PushInteraction(bobClick)
	b.waitPost("refusal of a replayed click", func(p slackfake.Post) bool {
		return p.ThreadTS == root && strings.Contains(p.Text, "already decided")
	})
	click(qaBob, "approve", approve)
	for deadline := time.Now().Add(5 * time.Second); refusals() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("second press not refused visibly:\n%s", b.dumpPosts())
		}
	}
	click(qaAlice, "decline", btn["decline"])
	b.waitIdle() // every started run ended: nothing more is on its way
	if n := b.count(inChannel(qaOther)); n != 1 {
		t.Fatalf("%d posts in %s, want exactly 1", n, qaOther)
	}
	if n := b.count(hasText("cardkiwi done")); n != 1 {
		t.Fatalf("final answer posted %d times", n)
	}
	b.verify()
}

// qaModelFailures: every way a model reply can go wrong ends the run
// visibly (or recovers), with no hang and no double post.
func qaModelFailures(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		script  []llmtest.Response
		want    string // text the thread must show
		timeout time.Duration
	}{
		{name: "invalid-json-args", script: []llmtest.Response{
			llmtest.Tools(llmtest.Call("c1", "remember", `{"text": "unterminated`)),
			llmtest.Text("recovered-from-bad-json"),
		}, want: "recovered-from-bad-json"},
		{name: "invalid-json-args-thrice", script: []llmtest.Response{
			llmtest.Tools(llmtest.Call("c1", "remember", `{oops`)),
			llmtest.Tools(llmtest.Call("c2", "remember", `not json at all`)),
			llmtest.Tools(llmtest.Call("c3", "remember", `[1,2`)),
			llmtest.Text("should-not-be-posted"),
		}, want: "invalid tool calls"},
		{name: "unknown-tool", script: []llmtest.Response{
			llmtest.Tools(llmtest.Call("c1", "launch_missiles", `{}`)),
			llmtest.Text("recovered-from-unknown-tool"),
		}, want: "recovered-from-unknown-tool"},
		{name: "empty-choices", script: repeat(8, llmtest.Raw(200, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`)),
			want: "I couldn't finish this"},
		{name: "not-json", script: []llmtest.Response{
			llmtest.Raw(200, `<html>gateway</html>`),
			llmtest.Text("recovered-from-html"),
		}, want: "recovered-from-html"},
		{name: "http-500", script: repeat(8, llmtest.Error(500, "boom")), want: "I had to pause"},
		{name: "http-500-once", script: []llmtest.Response{llmtest.Error(500, "boom"), llmtest.Text("recovered-after-500")}, want: "recovered-after-500"},
		{name: "429-retry-after-short", script: []llmtest.Response{
			llmtest.RateLimited("1"), llmtest.Text("recovered-after-429"),
		}, want: "recovered-after-429"},
		{name: "timeout", env: map[string]string{"MARLOWE_MODEL_TIMEOUT": "1s"}, script: repeat(8, llmtest.Hang()),
			want: "I had to pause", timeout: 15 * time.Second},
		{name: "429-retry-after-long", script: repeat(8, llmtest.RateLimited("120")), want: "rate limiting"},
		{name: "endless-tool-calls", script: repeat(30, llmtest.Tools(llmtest.Call("", "recall", `{"query":"anything"}`))),
			want: "step budget", timeout: 25 * time.Second},
		{name: "401", script: []llmtest.Response{llmtest.Error(401, "bad key")}, want: "credentials"},
		{name: "empty-text", script: []llmtest.Response{llmtest.Text("")}, want: "Done."},
	}
	subs := map[string]func(*testing.T){}
	for _, tc := range cases {
		// The SDK's own retries off, and at the provider default (what a
		// deployment runs with) for the cases they change.
		retries := []string{"0"}
		switch tc.name {
		case "http-500", "http-500-once", "timeout", "empty-choices", "429-retry-after-short":
			retries = append(retries, "")
		}
		for _, sdkRetries := range retries {
			name := tc.name
			if sdkRetries == "" {
				name += "/sdk-default-retries"
			}
			subs[name] = func(t *testing.T) {
				vars := map[string]string{"MARLOWE_MODEL_MAX_RETRIES": sdkRetries}
				maps.Copy(vars, tc.env)
				b := startQA(t, qaOpts{env: vars})
				b.model.Enqueue(tc.script...)
				root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" do the thing")
				d := tc.timeout
				if d == 0 {
					d = 12 * time.Second
				}
				// What a message shows now: a checklist that listed nothing
				// is edited into the answer (issue 36).
				shows := func(p slackfake.Post) bool {
					if p.ThreadTS != root {
						return false
					}
					if strings.Contains(p.Text, tc.want) {
						return true
					}
					m, _ := b.slack.Message(p.Channel, p.TS)
					header := strings.HasPrefix(m.Text, "✅") || strings.HasPrefix(m.Text, "❌") || strings.HasPrefix(m.Text, "⏸") || strings.HasPrefix(m.Text, "🚫")
					return strings.Contains(m.Text, tc.want) && !header
				}
				b.waitPostFor(d, tc.want, shows)
				// A run that did tool work or took 3 s shows a checklist,
				// which ends in a terminal state (or, listing nothing, as
				// the answer); a quick one only its outcome.
				checklist := false
				for _, p := range b.slack.Posts() {
					if p.Channel == qaGeneral && p.ThreadTS == root {
						checklist = strings.HasPrefix(p.Text, "⏳")
						break
					}
				}
				if checklist {
					b.waitChecklist(qaGeneral, root, "✅ Done|❌ Failed|⏸ Paused|🚫 Stopped|"+tc.want)
				}
				time.Sleep(500 * time.Millisecond)
				if n := b.count(shows); n != 1 {
					t.Fatalf("%q posted %d times:\n%s", tc.want, n, b.dumpPosts())
				}
				if n := b.count(hasText("should-not-be-posted")); n != 0 {
					t.Fatalf("a reply after a failed run was posted")
				}
				// One outcome, after the checklist if any (or in it): nothing else.
				want := 1
				if checklist && b.count(func(p slackfake.Post) bool { return p.ThreadTS == root && strings.Contains(p.Text, tc.want) }) == 1 {
					want = 2
				}
				if n := b.count(inThread(qaGeneral, root)); n != want {
					t.Fatalf("%d posts in the thread, want %d (checklist %v, outcome):\n%s", n, want, checklist, b.dumpPosts())
				}
				// The checklist's last edit comes just before run.completed is
				// journaled: await the journal rather than guess a delay.
				deadline := time.Now().Add(10 * time.Second)
				for {
					var open []string
					for id, r := range b.journal(qaGeneral).Runs {
						if r.Status == "working" || r.Status == "queued" {
							open = append(open, id+" "+string(r.Status))
						}
					}
					if len(open) == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("runs left unfinished: %v", open)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
	}
	runConcurrently(t, subs)
}

func repeat(n int, r llmtest.Response) []llmtest.Response {
	out := make([]llmtest.Response, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// qaLongAnswerSplit: an answer over Slack's 40k limit, with code
// fences, arrives as several messages in the thread, in order, each under
// the limit and each with balanced fences, nothing lost.
func qaLongAnswerSplit(t *testing.T) {
	b := startQA(t, qaOpts{})
	var sb strings.Builder
	sb.WriteString("Here is the full dump.\n\n")
	for i := range 30 {
		sb.WriteString("Section " + itoa(uint64(i)) + " explains things in prose that goes on for a while.\n\n")
		sb.WriteString("```go\n")
		for j := range 30 {
			sb.WriteString("fmt.Println(\"line " + itoa(uint64(i*100+j)) + " of the generated code block\") // comment\n")
		}
		sb.WriteString("```\n\n")
	}
	long := sb.String()
	if len(long) < 40000 {
		t.Fatalf("test answer is only %d chars", len(long))
	}
	b.model.Enqueue(llmtest.Text(long))
	root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" dump it all")
	// About 30 parts go out through the channel's paced queue: allow for a
	// loaded machine.
	b.waitPostFor(60*time.Second, "last part", hasText("line 2929 of"))
	b.waitIdle() // every started run ended: nothing more is on its way
	var parts []string
	for _, p := range b.slack.Posts() {
		if p.ThreadTS == root && strings.Contains(p.Text, "line ") || strings.Contains(p.Text, "Here is the full dump") {
			parts = append(parts, p.Text)
		}
	}
	if len(parts) < 10 {
		t.Fatalf("answer came in %d parts", len(parts))
	}
	for i, p := range parts {
		if n := len([]rune(p)); n > 4000 {
			t.Errorf("part %d is %d chars", i, n)
		}
		fences := 0
		for _, line := range strings.Split(p, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fences++
			}
		}
		if fences%2 != 0 {
			t.Errorf("part %d has unbalanced fences:\n%s", i, p)
		}
	}
	all := strings.Join(parts, "\n")
	for i := range 3000 {
		if i%100 >= 30 {
			continue
		}
		if !strings.Contains(all, "\"line "+itoa(uint64(i))+" of the") {
			t.Fatalf("line %d lost", i)
		}
		if strings.Count(all, "\"line "+itoa(uint64(i))+" of the") != 1 {
			t.Fatalf("line %d repeated", i)
		}
	}
}

// qaSlackRateLimitAndEditFailures: 429s on chat.postMessage and a
// chat.update that keeps failing delay the run but do not break it, lose
// the answer or post it twice.
func qaSlackRateLimitAndEditFailures(t *testing.T) {
	b := startQA(t, qaOpts{})
	b.slack.RateLimit("chat.postMessage", 2, time.Second)
	b.slack.FailCalls("chat.update", 1000, "cant_update_message")
	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "update_checklist", `{"items":[{"text":"look","done":true}]}`)),
		llmtest.Text("ratekiwi answer"),
	)
	root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" rate limited run")
	b.waitPostFor(15*time.Second, "answer despite 429s", hasText("ratekiwi answer"))
	b.waitLog("run completed")
	b.waitIdle() // every started run ended: nothing more is on its way
	if n := b.count(hasText("ratekiwi answer")); n != 1 {
		t.Fatalf("answer posted %d times", n)
	}
	if n := b.count(inThread(qaGeneral, root)); n != 2 {
		t.Fatalf("%d posts in the thread, want 2:\n%s", n, b.dumpPosts())
	}
	rl := 0
	for _, c := range b.slack.Calls() {
		if c.Method == "chat.postMessage" && c.Status == http.StatusTooManyRequests {
			rl++
		}
	}
	if rl != 2 {
		t.Fatalf("%d rate-limited posts, want 2", rl)
	}
	st := b.journal(qaGeneral)
	for id, r := range st.Runs {
		if r.Status != "done" {
			t.Fatalf("run %s is %s", id, r.Status)
		}
	}
}

// qaConversationFlow: a reply_in_thread plus the same final text posts once;
// a second message while the run works is not dropped (steering) and gets
// no second run; the top-level window moves to the last person answered;
// a <@BOT|name> mention counts.
func qaConversationFlow(t *testing.T) {
	b := startQA(t, qaOpts{})
	// reply_in_thread then the same text as the final answer.
	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "reply_in_thread", `{"text":"dupkiwi: 42"}`)),
		llmtest.Text("dupkiwi: 42"),
	)
	root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" what is the answer")
	b.waitPost("reply", hasText("dupkiwi: 42"))
	b.waitIdle()
	if n := b.count(hasText("dupkiwi")); n != 1 {
		t.Fatalf("answer posted %d times:\n%s", n, b.dumpPosts())
	}

	// Steering: Bob writes in the thread while the run works. His message
	// is not dropped: the model sees it (in the call under way or the next
	// one) and the thread gets one answer per model reply, no extra run.
	b.model.Enqueue(llmtest.Response{Text: "slowkiwi first answer", Delay: 800 * time.Millisecond})
	b.slack.Say(qaGeneral, root, qaAlice, "slow question")
	time.Sleep(200 * time.Millisecond)
	b.slack.Say(qaGeneral, root, qaBob, "steerkiwi also this")
	b.waitLog("steering message queued")
	b.waitIdle()
	reqs, err := b.model.ChatRequests()
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, r := range reqs {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(string(m.Content), "steerkiwi") {
				seen = true
			}
		}
	}
	if !seen {
		t.Fatalf("Bob's message in the working thread never reached the model:\n%s", b.dumpPosts())
	}
	// One answer: a reply the model made before it saw Bob's message is
	// superseded by the one it makes after (or the first already saw it).
	if n := b.count(hasText("slowkiwi")) + b.count(saidTo("steerkiwi")); n != 1 {
		t.Fatalf("%d answers for the steered run:\n%s", n, b.dumpPosts())
	}

	// The top-level window moves: Alice answered, then Bob (mention with a
	// label); now Bob's untagged top-level message is answered, Alice's not.
	b.slack.Say(qaGeneral, "", qaBob, "<@"+b.slack.Config().BotUserID+"|marlowe-fake> labelkiwi")
	b.waitPost("labelled mention", saidTo("labelkiwi"))
	b.slack.Say(qaGeneral, "", qaAlice, "alicetopkiwi")
	b.slack.Say(qaGeneral, "", qaBob, "bobtopkiwi")
	b.waitPost("window holder's follow-up", saidTo("bobtopkiwi"))
	b.quiet("the previous window holder", 600*time.Millisecond, saidTo("alicetopkiwi"))
	// Bob's untagged reply in someone else's thread is not a top-level
	// follow-up.
	croot, _ := b.slack.Say(qaGeneral, "", qaCarol, "carol thread")
	_ = croot
	b.slack.Say(qaGeneral, croot, qaBob, "bobinthreadkiwi")
	b.quiet("untagged reply in another thread", 600*time.Millisecond, saidTo("bobinthreadkiwi"))
}

// qaChecklistEditTransientFailure: one transient chat.update failure
// (Slack's internal_error) must not leave the checklist saying "Working on
// it" next to a finished answer.
func qaChecklistEditTransientFailure(t *testing.T) {
	b := startQA(t, qaOpts{})
	b.slack.FailCalls("chat.update", 1, "internal_error")
	// Tool work: the run shows a checklist.
	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "recall", `{"query":"editkiwi"}`)),
		llmtest.Text("You said: editkiwi"),
	)
	root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" editkiwi")
	b.waitPost("answer", saidTo("editkiwi"))
	var checklist slackfake.Post
	for _, p := range b.slack.Posts() {
		if p.ThreadTS == root {
			checklist = p
			break
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, _ := b.slack.Message(qaGeneral, checklist.TS)
		if strings.Contains(m.Text, "Done") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checklist stuck at %q after the run finished (updates: %+v)\n%s", m.Text, b.slack.Updates(), b.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// qaSupersededCard: a new message in the thread while a card waits
// supersedes it; a later click on that card executes nothing and says so.
func qaSupersededCard(t *testing.T) {
	b := startQA(t, qaOpts{})
	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+qaOther+`","text":"supkiwi report"}`)),
		llmtest.Text("supkiwi: ok, not sharing it."),
	)
	root, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" share the report elsewhere")
	card := b.waitPost("card", isCard)
	b.slack.Say(qaGeneral, root, qaAlice, "actually, never mind")
	b.waitPost("answer after superseding", hasText("supkiwi: ok"))
	btn := cardButtons(t, card.Blocks)
	b.slack.PushInteraction(b.slack.BlockActionsJSON(slackfake.Click{
		Channel: qaGeneral, MessageTS: card.TS, ThreadTS: root, User: qaBob, UserName: "bob",
		ActionID: "approve", Value: btn["approve"], Label: "Approve",
	}))
	b.waitPost("refusal of a click on a superseded card", func(p slackfake.Post) bool {
		return p.ThreadTS == root && strings.Contains(p.Text, "already decided")
	})
	b.waitIdle() // every started run ended: nothing more is on its way
	if n := b.count(inChannel(qaOther)); n != 0 {
		t.Fatalf("a superseded card executed: %d posts in %s", n, qaOther)
	}
	// The card itself no longer offers buttons.
	if m, _ := b.slack.Message(qaGeneral, card.TS); strings.Contains(string(m.Blocks), `"button"`) {
		t.Fatalf("superseded card still has buttons: %s", m.Blocks)
	}
}
