package slack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// `forget me` through the Slack adapter with 10,220 of Alice's messages in
// the journal (and 280 of Bob's): the click on Erase is delivered and
// acknowledged within Slack's deadline (the delivery journals the request
// and its job and returns), and the erasure finishes in the background,
// reported in her DM. The old click ran the whole erasure inside the
// delivery and missed the deadline (Slack redelivered it, unacknowledged).
func TestForgetMeClickIsAcknowledgedAndErasesInTheBackground(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	eng, journal := startEngine(t, a, teammateModel{}, logs)
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("no connection")
	}
	ctx := context.Background()
	b := core.NewBoundary(nil)
	team := f.Config().TeamID
	for c := range 20 {
		sc := core.Scope{Platform: Platform, Workspace: team, Channel: fmt.Sprintf("C0SEED%04d", c)}
		var drafts []core.Draft
		for i := range 525 {
			who, text := core.Person{ID: alice}, fmt.Sprintf("alice's note %d in %d: the quarterly plan moves to the new owner", i, c)
			if i%40 == 1 {
				who, text = core.Person{ID: bob}, fmt.Sprintf("bob says %d in %d", i, c)
			}
			d, err := b.Human(who, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("S%d.%d", c, i), Author: who, Visibility: core.Public, Text: text})
			if err != nil {
				t.Fatal(err)
			}
			drafts = append(drafts, d)
		}
		if _, err := journal.Append(ctx, drafts...); err != nil {
			t.Fatal(err)
		}
	}

	_, ids := f.Say(chDM, "", alice, "forget me")
	ackAll(t, f, ids)
	card := waitPost(t, f, func(p slackfake.Post) bool { return p.Channel == chDM && strings.Contains(p.Text, "Erase") })
	tok := buttons(t, card.Blocks)["erase"]
	if tok == "" {
		t.Fatalf("no Erase button on %+v", card)
	}
	click := f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: chDM, MessageTS: card.TS, User: alice, UserName: "alice", BlockID: card.TS, ActionID: "erase", Value: tok, Label: "Erase",
	}))
	ackAll(t, f, []string{click})
	if n := f.Attempts(click); n != 1 {
		t.Fatalf("the click was delivered %d times: its first delivery missed the deadline", n)
	}
	if err := eng.WaitIdle(ctx); err != nil { // the job, in the background
		t.Fatal(err)
	}
	waitPost(t, f, func(p slackfake.Post) bool {
		return p.Channel == chDM && strings.Contains(p.Text, "Erased your messages")
	})
	left := 0
	chs, err := journal.Channels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		for _, c := range journal.All(ch) {
			if c.Kind() == core.KindMessageReceived && !c.Redacted() && strings.Contains(string(c.RawPayload()), "quarterly plan") {
				left++
			}
		}
	}
	if left > 0 {
		t.Fatalf("%d of Alice's messages are left after the job", left)
	}
}
