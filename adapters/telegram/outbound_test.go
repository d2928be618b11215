package telegram

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
)

func scope(ch, thread string) core.Scope {
	return core.Scope{Platform: Platform, Channel: ch, Thread: thread}
}

// Replies stay where they were asked: in a forum topic every send carries
// its message_thread_id (and never 1), in General or a plain group none,
// and each is a reply to the message answered.
func TestRepliesKeepTheirTopic(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	long := strings.Repeat("word ", 1000) // 5,000 chars: two messages
	for _, tc := range []struct {
		name, channel, thread string
		text                  string
		topic, reply          int64
	}{
		{"topic", "-1002:42", "131", "in the topic", 42, 131},
		{"topic, long answer", "-1002:42", "132", long, 42, 132},
		{"General", "-1002", "133", "in General", 0, 133},
		{"plain group, unprompted", "-1001", "", "digest", 0, 0},
		{"DM", "501", "", "hello", 0, 0},
	} {
		before := len(f.Sent())
		if _, err := a.Post(ctx, core.Outbound{Key: "k-" + tc.name, Scope: scope(tc.channel, tc.thread), Text: tc.text, Priority: core.PriorityHigh}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sent := f.Sent()[before:]
		if len(sent) == 0 {
			t.Fatalf("%s: nothing sent", tc.name)
		}
		for _, s := range sent {
			if s.Topic != tc.topic || s.ReplyTo != tc.reply {
				t.Errorf("%s: sent topic %d reply %d, want topic %d reply %d", tc.name, s.Topic, s.ReplyTo, tc.topic, tc.reply)
			}
		}
	}
	if _, err := a.Post(ctx, core.Outbound{Scope: scope("-1002:1", ""), Text: "x"}); err == nil {
		t.Error("a channel naming topic 1 (General) was accepted: General is the chat itself")
	}
}

// One key, one message: a repeated Post returns the first ref.
func TestPostKeyIsIdempotent(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	out := core.Outbound{Key: "run1/7/0", Scope: scope("-1001", "5"), Text: "answer"}
	var wg sync.WaitGroup
	refs := make([]core.MessageRef, 4)
	for i := range refs {
		wg.Go(func() {
			r, err := a.Post(ctx, out)
			if err != nil {
				t.Error(err)
			}
			refs[i] = r
		})
	}
	wg.Wait()
	if n := len(f.Sent()); n != 1 {
		t.Fatalf("%d messages for one key", n)
	}
	for _, r := range refs[1:] {
		if r.ID != refs[0].ID {
			t.Fatalf("refs differ: %v", refs)
		}
	}
}

// Long answers are split under 4,096 UTF-16 units (the fake refuses longer
// ones, as Telegram does), emoji count double, and a code block cut across
// messages is closed and reopened.
func TestSplitUTF16AndCodeBlocks(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	var b strings.Builder
	b.WriteString("Here is the log:\n```text\n")
	for i := range 400 {
		b.WriteString("🚀🚀🚀🚀 ok")
		b.WriteString(strings.Repeat("x", i%3))
		b.WriteString("\n")
	}
	b.WriteString("```\nAll good. 🎉")
	text := b.String()
	if n := len([]rune(text)); n > 4096 {
		t.Fatalf("setup: %d runes; the test wants a text that fits in runes but not in UTF-16 units", n)
	}
	if n := len(utf16.Encode([]rune(text))); n <= 4096 {
		t.Fatalf("setup: %d UTF-16 units, want more than 4096", n)
	}
	if _, err := a.Post(context.Background(), core.Outbound{Key: "long", Scope: scope("-1001", ""), Text: text}); err != nil {
		t.Fatal(err)
	}
	sent := f.Sent()
	if len(sent) < 2 {
		t.Fatalf("%d messages, want a split", len(sent))
	}
	var joined strings.Builder
	for i, s := range sent {
		if n := len(utf16.Encode([]rune(s.Text))); n > MaxMessageChars {
			t.Errorf("part %d: %d UTF-16 units", i, n)
		}
		if strings.Count(s.Text, "```")%2 != 0 {
			t.Errorf("part %d has an unbalanced code fence", i)
		}
		joined.WriteString(s.Text)
	}
	if !strings.Contains(sent[1].Text, "```text") {
		t.Errorf("second part does not reopen the code block with its info string: %.40q", sent[1].Text)
	}
	if !strings.HasSuffix(joined.String(), "All good. 🎉") || strings.Count(joined.String(), "🚀") != 1600 {
		t.Error("content lost in the split")
	}
}

func approvalCard(tokens ...string) *core.Card {
	c := &core.Card{ID: "01JAPPROVAL", Title: "Approve sending the report?", Body: "to ops@example.com",
		Fields: []core.CardField{{Label: "Tool", Value: "send_email"}}}
	ids := []string{"approve", "decline"}
	for i, tok := range tokens {
		c.Actions = append(c.Actions, core.CardAction{ID: ids[i%2], Label: strings.ToUpper(ids[i%2][:1]) + ids[i%2][1:], Token: tok})
	}
	return c
}

// Cards are inline keyboards whose callback_data is the signed token; a
// token over 64 bytes is refused before anything is sent; a resolved card
// is edited in place and loses its buttons.
func TestCardKeyboardAndResolution(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	tokA, tokD := "01JAPPROVAL0000000000000000.aMACMACMACMACMACMACMACM", "01JAPPROVAL0000000000000000.dMACMACMACMACMACMACMACM"
	ref, err := a.Post(ctx, core.Outbound{Key: "card", Scope: scope("-1002:42", "140"), Card: approvalCard(tokA, tokD), Priority: core.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Sent()[0]
	if s.Topic != 42 || len(s.Keyboard) != 1 || len(s.Keyboard[0]) != 2 ||
		s.Keyboard[0][0].CallbackData != tokA || s.Keyboard[0][1].CallbackData != tokD || s.Keyboard[0][0].Text != "Approve" {
		t.Fatalf("card sent as %+v", s)
	}
	if !strings.Contains(s.Text, "Approve sending the report?") || !strings.Contains(s.Text, "Tool: send_email") {
		t.Errorf("card text %q", s.Text)
	}
	if _, err := a.Post(ctx, core.Outbound{Scope: scope("-1001", ""), Card: approvalCard(strings.Repeat("t", 65))}); err == nil {
		t.Fatal("a 65-byte token was accepted")
	}
	if len(f.Sent()) != 1 {
		t.Fatal("the oversized card reached Telegram")
	}
	done := approvalCard(tokA, tokD)
	done.Resolution = "✅ Approved by @alice at 10:02 UTC"
	if err := a.Update(ctx, ref, core.Outbound{Card: done, Priority: core.PriorityHigh}); err != nil {
		t.Fatal(err)
	}
	e := f.Edits()[0]
	if !e.HasMarkup || len(e.Keyboard) != 0 || !strings.Contains(e.Text, "Approved by @alice") {
		t.Fatalf("resolved card edited as %+v", e)
	}
	// Telegram's "message is not modified" is success.
	if err := a.Update(ctx, ref, core.Outbound{Card: done}); err != nil {
		t.Fatalf("repeating an edit: %v", err)
	}
}

// Every button press is answered (so it never spins): after the click is
// recorded, or after a short wait when recording is slow, or with a notice
// when it failed (polling then delivers it again; the repeat answer is not
// sent twice to the person).
func TestCallbackAlwaysAnswered(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	a.answerWait = 100 * time.Millisecond
	release := make(chan struct{})
	rec := newRecorder()
	rec.hook = func(ctx context.Context, n int, in core.Inbound) error {
		switch n {
		case 2:
			return errors.New("journal down")
		case 4:
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	run(t, a, rec.deliver)
	ref, err := a.Post(context.Background(), core.Outbound{Scope: scope("-1002:42", "150"), Card: approvalCard("tokA", "tokD")})
	if err != nil {
		t.Fatal(err)
	}
	msg := atoi(t, ref.ID)

	// 1: recorded, then answered without text.
	_, q1 := f.Click(forum.ID, msg, bob, "tokA")
	awaitFake(t, f, "answer 1", func() bool { return len(f.Answers()) == 1 })
	if an := f.Answers()[0]; an.ID != q1 || an.Text != "" {
		t.Fatalf("answer %+v", an)
	}
	c := rec.clicks()[0]
	if c.Token != "tokA" || c.By.ID != "502" || c.Scope.Channel != "-1002:42" || c.Scope.Thread != "" {
		t.Fatalf("click %+v", c)
	}

	// 2 fails, 3 is its redelivery: one answer, saying it was not recorded.
	_, q2 := f.Click(forum.ID, msg, alice, "tokD")
	rec.await(t, "the retried click", func() bool { return len(rec.clicks()) == 2 })
	awaitFake(t, f, "answer 2", func() bool { return len(f.Answers()) == 2 })
	if an := f.Answers()[1]; an.ID != q2 || !strings.Contains(an.Text, "not recorded") {
		t.Fatalf("answer to a failed click: %+v", an)
	}

	// 4 is slow: answered before the engine returns.
	_, q4 := f.Click(forum.ID, msg, alice, "tokA")
	awaitFake(t, f, "answer while recording", func() bool { return len(f.Answers()) == 3 })
	if an := f.Answers()[2]; an.ID != q4 || an.Text != "" {
		t.Fatalf("answer %+v", an)
	}
	if len(rec.clicks()) != 2 {
		t.Fatal("setup: the slow click finished early")
	}
	close(release)
	rec.await(t, "slow click recorded", func() bool { return len(rec.clicks()) == 3 })
	if n := len(f.Answers()); n != 3 {
		t.Fatalf("%d answers, want 3", n)
	}
}

// A 429 is waited out for exactly what retry_after says, then the same
// call is made again; meanwhile the chat's queue holds, an answer queued
// behind checklist edits goes first, and queued edits of one message
// collapse to the latest text.
func TestFloodControlRetryAfterAndPriority(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	check, err := a.Post(ctx, core.Outbound{Scope: scope("-1001", "160"), Text: "⏳ Working on it"})
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimit("sendMessage", 1, time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := a.Post(ctx, core.Outbound{Scope: scope("-1001", "160"), Text: "blocked first"}); err != nil {
			t.Error(err)
		}
	})
	awaitFake(t, f, "the 429", func() bool { return f.CallCount("sendMessage") == 2 })
	for i := range 3 {
		wg.Go(func() {
			if err := a.Update(ctx, check, core.Outbound{Text: "⏳ step " + string(rune('1'+i)), Priority: core.PriorityEdit}); err != nil {
				t.Error(err)
			}
		})
	}
	// Wait until all three edits are queued (coalesced into one item, beside
	// the refused post, whose zero Priority is PriorityEdit too).
	eventually(t, "edits queued", func() bool {
		calls, callers := a.pacer.q.Queued(group.ID, core.PriorityEdit)
		return calls == 2 && callers == 4
	})
	wg.Go(func() {
		if _, err := a.Post(ctx, core.Outbound{Scope: scope("-1001", "160"), Text: "final answer", Priority: core.PriorityHigh}); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if d := time.Since(start); d < time.Second {
		t.Fatalf("retry_after 1s not honoured: done after %v", d)
	}
	sent := f.Sent()
	if len(sent) != 3 || sent[1].Text != "final answer" || sent[2].Text != "blocked first" {
		var got []string
		for _, s := range sent {
			got = append(got, s.Text)
		}
		t.Fatalf("send order %q: want the final answer before the retried normal post", got)
	}
	if e := f.Edits(); len(e) != 1 {
		t.Fatalf("%d edits, want the three queued ones coalesced into one", len(e))
	}
	if got := f.Calls(); got[len(got)-1].Method != "editMessageText" {
		t.Fatalf("the checklist edit was not last: %s", got[len(got)-1].Method)
	}
}

func TestReactAndAdmins(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	if err := a.React(ctx, core.MessageRef{Scope: scope("-1001", ""), ID: "12"}, "eyes"); err != nil {
		t.Fatal(err)
	}
	if r := f.Reactions(); len(r) != 1 || r[0].Emoji != "👀" || r[0].MessageID != 12 {
		t.Fatalf("reactions %+v", r)
	}
	f.SetAdmins(group.ID, 501, 503)
	for _, tc := range []struct {
		ch, user string
		want     bool
	}{
		{"-1001", "501", true}, {"-1001", "503", true}, {"-1001", "502", false},
		{"-1002:42", "501", false}, {"501", "501", true}, {"501", "502", false},
	} {
		got, err := a.IsAdmin(ctx, scope(tc.ch, ""), tc.user)
		if err != nil || got != tc.want {
			t.Errorf("IsAdmin(%s, %s) = %v, %v; want %v", tc.ch, tc.user, got, err, tc.want)
		}
	}
	// Cached: one getChatAdministrators per chat per minute.
	if n := f.CallCount("getChatAdministrators"); n != 2 {
		t.Errorf("%d getChatAdministrators calls, want 2 (one per group)", n)
	}
	if _, err := a.Self(ctx); err != nil {
		t.Fatal(err)
	}
	if on, ok := a.PrivacyMode(); !on || !ok {
		t.Errorf("privacy mode %v (known %v), want on: the fake's default is Telegram's", on, ok)
	}
	dm, err := a.OpenDM(ctx, "501")
	if err != nil || dm.Channel != "501" {
		t.Fatalf("OpenDM: %+v %v", dm, err)
	}
	if _, err := a.Post(ctx, core.Outbound{Scope: dm, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	_ = telegramfake.Sent{}
}

// A refusal for the clicker alone (core.Ephemeral) becomes the alert that
// answers their press; with no press waiting, it goes to them privately.
func TestEphemeralIsTheCallbackAlert(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	rec := newRecorder()
	rec.hook = func(_ context.Context, _ int, in core.Inbound) error {
		if c := in.Click; c != nil && c.Token == "forged" {
			// As the engine does: the refusal is queued, shown after
			// Deliver returned.
			go func() {
				if err := a.PostEphemeral(context.Background(), c.Scope, c.By.ID, "⚠️ That button could not be verified, so nothing was done."); err != nil {
					t.Error(err)
				}
			}()
		}
		return nil
	}
	run(t, a, rec.deliver)
	ref, err := a.Post(context.Background(), core.Outbound{Scope: scope("-1001", ""), Card: approvalCard("tokA", "tokD")})
	if err != nil {
		t.Fatal(err)
	}
	_, q := f.Click(group.ID, atoi(t, ref.ID), bob, "forged")
	awaitFake(t, f, "the answer", func() bool { return len(f.Answers()) == 1 })
	if an := f.Answers()[0]; an.ID != q || !an.ShowAlert || !strings.Contains(an.Text, "could not be verified") {
		t.Fatalf("answer %+v: want the refusal as an alert", an)
	}
	if n := len(f.Sent()); n != 1 {
		t.Fatalf("%d messages sent: the refusal must not be posted in the chat", n)
	}
	// A valid press is answered plainly, within the grace.
	f.Click(group.ID, atoi(t, ref.ID), bob, "tokA")
	awaitFake(t, f, "the second answer", func() bool { return len(f.Answers()) == 2 })
	if an := f.Answers()[1]; an.ShowAlert || an.Text != "" {
		t.Fatalf("answer %+v: want a plain answer", an)
	}
	// No press waiting: a private message.
	if err := a.PostEphemeral(context.Background(), scope("-1001", ""), "502", "only for you"); err != nil {
		t.Fatal(err)
	}
	if s := f.Sent(); len(s) != 2 || s[1].ChatID != 502 || s[1].Text != "only for you" {
		t.Fatalf("fallback: %+v", s)
	}
}

// IsMember asks getChatMember: a chat's members and admins belong to it,
// someone who left does not; a private chat's only member is its user; a
// topic's channel is its chat's.
func TestIsMemberAsksGetChatMember(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	f.SetMembers(group.ID, 502)
	f.SetAdmins(group.ID, 501)
	for _, tc := range []struct {
		ch, user string
		want     bool
	}{
		{"-1001", "501", true}, {"-1001", "502", true}, {"-1001", "509", false}, {"-1001:42", "509", false},
		{"501", "501", true}, {"501", "502", false},
	} {
		got, err := a.IsMember(ctx, tc.ch, tc.user)
		if err != nil || got != tc.want {
			t.Errorf("IsMember(%s, %s) = %v, %v; want %v", tc.ch, tc.user, got, err, tc.want)
		}
	}
	if n := f.CallCount("getChatMember"); n != 4 {
		t.Errorf("%d getChatMember calls, want 4 (none for a private chat)", n)
	}
}
