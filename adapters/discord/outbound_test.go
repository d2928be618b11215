package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

func scopeOf(channel, thread string) core.Scope {
	return core.Scope{Platform: Platform, Workspace: guildID, Channel: channel, Thread: thread}
}

// A channel mention is answered in a thread started on that message (whose
// id is the message's); the next post in that thread goes into the same
// thread channel without starting another; an existing thread is posted in.
func TestPostStartsThreadOnMention(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	ctx := context.Background()
	bot := f.Bot()
	mid := f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot.ID + "> pull last week's signups\nplease"})
	rec.waitFor(t, "mention", func() bool { return len(rec.events()) == 1 })
	ev := rec.events()[0]

	// The engine answers a top-level message in the thread rooted at it.
	answer := core.Outbound{Key: "eff-1", Scope: scopeOf(general, ev.MessageID), Text: "Signups: 412", Priority: core.PriorityHigh}
	ref, err := a.Post(ctx, answer)
	if err != nil {
		t.Fatal(err)
	}
	if th := f.Threads(); len(th) != 1 || th[0] != mid {
		t.Fatalf("threads started %v, want one on %s", th, mid)
	}
	if ch := f.ChannelOf(ref.ID); ch != mid {
		t.Fatalf("answer posted in %s, want the thread %s", ch, mid)
	}
	if ref.Scope.Channel != general || ref.Scope.Thread != mid {
		t.Fatalf("ref scope %+v", ref.Scope)
	}
	// Same key again: the same message, nothing new.
	again, err := a.Post(ctx, answer)
	if err != nil || again.ID != ref.ID {
		t.Fatalf("repost = %v, %v; want %s", again.ID, err, ref.ID)
	}
	if _, err := a.Post(ctx, core.Outbound{Key: "eff-2", Scope: scopeOf(general, mid), Text: "More"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(ctx, core.Outbound{Key: "eff-3", Scope: scopeOf(general, oldThread), Text: "In the old thread"}); err != nil {
		t.Fatal(err)
	}
	if th := f.Threads(); len(th) != 1 {
		t.Fatalf("threads started %v, want still one", th)
	}
	posts := f.Posts()
	if len(posts) != 3 || posts[1].ChannelID != mid || posts[2].ChannelID != oldThread {
		t.Fatalf("posts %+v", posts)
	}
	// A follow-up in the new thread normalises to that thread of general.
	f.Say(discordfake.Msg{Channel: mid, Author: bob, Content: "by region?"})
	rec.waitFor(t, "follow-up", func() bool { _, ok := rec.eventByText("by region?"); return ok })
	fu, _ := rec.eventByText("by region?")
	if fu.Scope.Channel != general || fu.Scope.Thread != mid || fu.Visibility != core.Public {
		t.Fatalf("follow-up scope %+v %s", fu.Scope, fu.Visibility)
	}
}

// A create whose answer is lost is retried with the same nonce and
// enforce_nonce, so Discord returns the first message: one post.
func TestPostLostResponseNoDouble(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a := startAdapter(t, f, newRecorder().deliver)
	f.LoseResponses("POST", "channels/"+general+"/messages", 1)
	ref, err := a.Post(context.Background(), core.Outbound{Key: "eff-lost", Scope: scopeOf(general, ""), Text: "exactly once"})
	if err != nil {
		t.Fatal(err)
	}
	posts := f.Posts()
	if len(posts) != 1 || posts[0].ID != ref.ID {
		t.Fatalf("posts %+v, want exactly one with id %s", posts, ref.ID)
	}
	if posts[0].Nonce == "" || len(posts[0].Nonce) > 25 {
		t.Fatalf("nonce %q", posts[0].Nonce)
	}
	// A restarted process (empty ledger) re-issuing the key: one post still.
	b, err := New(Config{BotToken: "test-token", APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	ref2, err := b.Post(context.Background(), core.Outbound{Key: "eff-lost", Scope: scopeOf(general, ""), Text: "exactly once"})
	if err != nil || ref2.ID != ref.ID || len(f.Posts()) != 1 {
		t.Fatalf("re-issued post: %v %v, %d posts", ref2.ID, err, len(f.Posts()))
	}
}

// Long answers are split under 2,000 characters as Discord counts them,
// code fences closed and reopened, nothing lost.
func TestPostSplitsLongText(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a := startAdapter(t, f, newRecorder().deliver)
	var b strings.Builder
	b.WriteString("Here is the report 📈\n\n")
	for i := 0; i < 60; i++ {
		b.WriteString("Paragraph with some words about the numbers, repeated to be long enough. 🚀🚀\n\n")
	}
	b.WriteString("```go\n")
	for i := 0; i < 80; i++ {
		b.WriteString("fmt.Println(\"line of code that is in a fenced block\")\n")
	}
	b.WriteString("```\nThe end.")
	text := b.String()
	if _, err := a.Post(context.Background(), core.Outbound{Key: "eff-long", Scope: scopeOf(general, ""), Text: text}); err != nil {
		t.Fatal(err)
	}
	posts := f.Posts()
	if len(posts) < 4 {
		t.Fatalf("%d posts, want the text split", len(posts))
	}
	var joined strings.Builder
	for i, p := range posts {
		if n := utf16Len(p.Content); n > 2000 {
			t.Fatalf("part %d is %d UTF-16 units", i, n)
		}
		if strings.Count(p.Content, "```")%2 != 0 {
			t.Fatalf("part %d has an unbalanced code fence:\n%s", i, p.Content)
		}
		joined.WriteString(p.Content)
	}
	for _, want := range []string{"Here is the report", "The end.", "🚀🚀"} {
		if !strings.Contains(joined.String(), want) {
			t.Fatalf("split lost %q", want)
		}
	}
	if got, want := strings.Count(joined.String(), "line of code"), 80; got != want {
		t.Fatalf("%d code lines after the split, want %d", got, want)
	}
	if utf8.RuneCountInString(joined.String()) < utf8.RuneCountInString(text)-50 {
		t.Fatal("text lost in the split")
	}
}

// A 429 is waited out for its retry_after, then the same call succeeds; a
// storm of them costs no post and no duplicate, and a final answer queued
// behind checklist edits goes first once the channel is free.
func TestRateLimitStorm(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a := startAdapter(t, f, newRecorder().deliver)
	ctx := context.Background()
	first, err := a.Post(ctx, core.Outbound{Key: "eff-c", Scope: scopeOf(general, ""), Text: "checklist"})
	if err != nil {
		t.Fatal(err)
	}
	const retry = 150 * time.Millisecond
	f.RateLimit("POST", "channels/"+general+"/messages", 3, retry, false)
	f.RateLimit("PATCH", "channels/"+general+"/messages", 1, retry, false)
	start := time.Now()
	errc := make(chan error, 8)
	// Edits of the checklist, then the answer.
	for i := 0; i < 5; i++ {
		go func() {
			errc <- a.Update(ctx, first, core.Outbound{Scope: first.Scope, Text: "checklist step " + string(rune('1'+i)), Priority: core.PriorityEdit})
		}()
	}
	time.Sleep(20 * time.Millisecond) // the edits are queued before the answer
	ref, err := a.Post(ctx, core.Outbound{Key: "eff-answer", Scope: scopeOf(general, ""), Text: "the answer", Priority: core.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 3*retry {
		t.Fatalf("done in %v: retry_after (%v ×3) was not honoured", el, retry)
	}
	posts := f.Posts()
	if len(posts) != 2 || posts[1].ID != ref.ID {
		t.Fatalf("posts %+v, want the checklist and one answer", posts)
	}
	// After each 429 the next request on that route came no sooner than
	// retry_after.
	calls := f.Calls()
	var last time.Time
	for _, c := range calls {
		if c.Method != "POST" || !strings.HasPrefix(c.Path, "channels/"+general+"/messages") {
			continue
		}
		if !last.IsZero() && c.At.Sub(last) < retry-10*time.Millisecond {
			t.Fatalf("a request %v after a 429 (retry_after %v)", c.At.Sub(last), retry)
		}
		last = time.Time{}
		if c.Status == 429 {
			last = c.At
		}
	}
	// Coalesced: fewer edits reached Discord than were asked for, and the
	// last text won.
	edits := f.Edits()
	if len(edits) == 0 || len(edits) >= 5 {
		t.Fatalf("%d edits reached the fake, want between 1 and 4 (coalesced)", len(edits))
	}
	if a.pacer.rateLimited() < 3 {
		t.Fatalf("pacer saw %d 429s", a.pacer.rateLimited())
	}
}

// A global 429 holds every channel's queue.
func TestGlobalRateLimitHoldsAllChannels(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a := startAdapter(t, f, newRecorder().deliver)
	const retry = 300 * time.Millisecond
	f.RateLimit("POST", "channels/"+general+"/messages", 1, retry, true)
	if _, err := a.Post(context.Background(), core.Outbound{Key: "g1", Scope: scopeOf(general, ""), Text: "one"}); err != nil {
		t.Fatal(err)
	}
	var limitedAt time.Time
	for _, c := range f.Calls() {
		if c.Status == 429 {
			limitedAt = c.At
		}
	}
	if _, err := a.Post(context.Background(), core.Outbound{Key: "g2", Scope: scopeOf(ops, ""), Text: "two"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Calls() {
		if c.Method == "POST" && strings.HasPrefix(c.Path, "channels/"+ops) && c.At.Sub(limitedAt) < retry-20*time.Millisecond {
			t.Fatalf("ops was posted to %v after a global 429 of %v", c.At.Sub(limitedAt), retry)
		}
	}
}

// A card renders as content plus action rows whose buttons carry the
// signed token as custom_id; a click arrives as a core.CardClick and its
// interaction is acknowledged (type 6) within 3 s; the resolved card loses
// its buttons in place.
func TestCardClick(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	ctx := context.Background()
	card := &core.Card{ID: "ap1", Title: "Post to #ops?", Body: "The run wants to post.", Fields: []core.CardField{{Label: "Tool", Value: "post_to_channel"}},
		Actions: []core.CardAction{
			{ID: "approve", Label: "Approve", Token: "01JAPPROVAL.aMACMACMACMACMACMAC", Style: "primary"},
			{ID: "decline", Label: "Decline", Token: "01JAPPROVAL.dMACMACMACMACMACMAC", Style: "danger"},
		}}
	ref, err := a.Post(ctx, core.Outbound{Key: "eff-card", Scope: scopeOf(general, oldThread), Card: card, Priority: core.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	posts := f.Posts()
	var rows []struct {
		Type       int
		Components []struct {
			Type     int
			CustomID string `json:"custom_id"`
			Label    string
			Style    int
		}
	}
	if err := json.Unmarshal(posts[0].Components, &rows); err != nil || len(rows) != 1 || len(rows[0].Components) != 2 {
		t.Fatalf("components %s (%v)", posts[0].Components, err)
	}
	if b := rows[0].Components[0]; b.CustomID != card.Actions[0].Token || b.Label != "Approve" || b.Type != 2 {
		t.Fatalf("approve button %+v", b)
	}
	if !strings.Contains(posts[0].Content, "Post to #ops?") || !strings.Contains(posts[0].Content, "post_to_channel") {
		t.Fatalf("card content %q", posts[0].Content)
	}

	iid := f.Click(discordfake.Click{Channel: oldThread, MessageID: ref.ID, CustomID: card.Actions[0].Token, User: bob})
	rec.waitFor(t, "click", func() bool { return len(rec.clicks()) == 1 })
	c := rec.clicks()[0]
	if c.Token != card.Actions[0].Token || c.By.ID != bob.ID || c.Scope.Channel != general || c.Scope.Thread != oldThread || c.Scope.Workspace != guildID || c.Card != "01JAPPROVAL" || c.Action != "a" {
		t.Fatalf("click %+v", c)
	}
	if !f.Wait(5*time.Second, func() bool { return len(f.CallbacksLocked()) == 1 }) {
		t.Fatal("the interaction was never acknowledged")
	}
	cb := f.Callbacks()[0]
	if cb.InteractionID != iid || cb.Type != 6 || cb.Latency > 3*time.Second {
		t.Fatalf("callback %+v", cb)
	}
	// A refusal meant for the clicker alone goes as an ephemeral follow-up
	// on their interaction.
	if err := a.PostEphemeral(ctx, c.Scope, bob.ID, "🚫 Not accepted"); err != nil {
		t.Fatal(err)
	}
	if fu := f.Followups(); len(fu) != 1 || fu[0].InteractionID != iid || fu[0].Flags&64 == 0 || fu[0].Content != "🚫 Not accepted" {
		t.Fatalf("followups %+v", fu)
	}
	if err := a.PostEphemeral(ctx, c.Scope, alice.ID, "x"); err == nil {
		t.Fatal("ephemeral to someone who never clicked: no error")
	}
	// Resolving the card removes the buttons and shows the decision.
	resolved := *card
	resolved.Resolution = "✅ Approved by bob at 10:02"
	if err := a.Update(ctx, ref, core.Outbound{Card: &resolved, Priority: core.PriorityHigh}); err != nil {
		t.Fatal(err)
	}
	e := f.Edits()[len(f.Edits())-1]
	if e.ChannelID != oldThread || !strings.Contains(e.Content, "Approved by bob") || (string(e.Components) != "[]" && len(e.Components) != 0) {
		t.Fatalf("resolved edit %+v (components %s)", e, e.Components)
	}
}

// A click the engine cannot take is refused ephemerally, within 3 s.
func TestClickRefusedEphemerally(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	rec.fail = 10
	startAdapter(t, f, rec.deliver)
	f.Click(discordfake.Click{Channel: general, MessageID: "1", CustomID: "x.aforged", User: bob})
	if !f.Wait(5*time.Second, func() bool { return len(f.CallbacksLocked()) == 1 }) {
		t.Fatal("no interaction response")
	}
	cb := f.Callbacks()[0]
	if cb.Type != 4 || cb.Flags&64 == 0 || cb.Latency > 3*time.Second || !strings.Contains(cb.Content, "nothing was done") {
		t.Fatalf("callback %+v, want an ephemeral refusal", cb)
	}
}

func TestRenderCardLimits(t *testing.T) {
	var acts []core.CardAction
	for i := 0; i < 12; i++ {
		acts = append(acts, core.CardAction{ID: string(rune('a' + i)), Label: strings.Repeat("L", 100), Token: "tok." + string(rune('a'+i))})
	}
	content, comps, err := renderCard(&core.Card{Title: "T", Body: strings.Repeat("b", 3000), Actions: acts}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(comps) != 3 || utf16Len(content) > 2000 {
		t.Fatalf("%d rows, content %d", len(comps), utf16Len(content))
	}
	for _, bad := range [][]core.CardAction{
		{{ID: "a", Token: strings.Repeat("x", 101)}},
		{{ID: "a", Token: "same"}, {ID: "b", Token: "same"}},
		{{ID: "a"}},
	} {
		if _, _, err := renderCard(&core.Card{Title: "T", Actions: bad}, ""); err == nil {
			t.Errorf("card %+v rendered", bad)
		}
	}
	if _, _, err := renderCard(&core.Card{Title: "T", Actions: append(acts, acts...)[:26]}, ""); err == nil {
		t.Error("26 buttons rendered")
	}
}

// TestClickAnsweredBeforeItsAck: the engine answers a click on a button it
// has no record of at once, privately, while the adapter has not yet
// acknowledged the interaction. The follow-up waits for the ack instead of
// failing ("Interaction has not been acknowledged"), which made the
// engine fall back to a public message mentioning the clicker.
func TestClickAnsweredBeforeItsAck(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	var a *Adapter
	answered := make(chan error, 1)
	deliver := func(ctx context.Context, in core.Inbound) error {
		if in.Click != nil {
			// Answered before deliver returns, so before the ack.
			c := *in.Click
			res := make(chan error, 1)
			go func() {
				res <- a.PostEphemeral(context.Background(), c.Scope, c.By.ID, "⚠️ I can't find the request behind that button")
			}()
			err := <-res
			answered <- err
		}
		return nil
	}
	a = startAdapter(t, f, deliver)
	ref, err := a.Post(context.Background(), core.Outbound{Key: "eff-old", Scope: scopeOf(general, ""), Priority: core.PriorityHigh,
		Card: &core.Card{ID: "old", Title: "An old card", Actions: []core.CardAction{{ID: "approve", Label: "Approve", Token: "01JGONE.aMACMACMACMACMACMAC"}}}})
	if err != nil {
		t.Fatal(err)
	}
	iid := f.Click(discordfake.Click{Channel: general, MessageID: ref.ID, CustomID: "01JGONE.aMACMACMACMACMACMAC", User: bob})
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the private answer failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	if fu := f.Followups(); len(fu) != 1 || fu[0].InteractionID != iid || fu[0].Flags&64 == 0 {
		t.Fatalf("followups %+v, want one ephemeral", fu)
	}
}
