package main

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// The DMs of the forget test: one per person.
const (
	qaAliceDM = "D0QAALICE1"
	qaBobDM   = "D0QABOBDM1"
)

// Alice's texts in three channels, each quoted by the bot's answer; Bob's
// note beside them.
const (
	forgetNote    = "the heron vault code is zebrafjord 7731"
	forgetOther   = "the pelican dashboard needs a quokka refresh"
	forgetPrivate = "schedule the ostrich launch for friday"
	bobNote       = "the coffee machine is broken again"
)

// aliceWords are the distinctive words of Alice's texts.
var aliceWords = []string{"zebrafjord", "pelican", "quokka", "ostrich"}

func holdsAny(words []string) func(string) bool {
	return func(s string) bool {
		l := strings.ToLower(s)
		for _, w := range words {
			if strings.Contains(l, w) || strings.Contains(l, hex.EncodeToString([]byte(w))) {
				return true
			}
		}
		return false
	}
}

// TestQAForgetMePostgres: `forget me` across three channels, through the
// real `bot serve` on PostgreSQL with Redis and the fake Slack. Each
// person's `export my data` is uploaded to their DM as a JSON file holding
// exactly their data. Bob cannot `forget <@Alice>`, nor confirm her card.
// Alice's confirmation leaves none of her texts in any row of any table
// (journal, memory index, embeddings, full-text index, restatements) or
// Redis key or value; Bob's note stays; `bot verify` passes; `bot replay`
// of each channel shows the markers and none of her words; `bot memory
// rebuild --all` brings nothing back.
func TestQAForgetMePostgres(t *testing.T) {
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	extra := map[string]string{"MARLOWE_DATABASE_URL": dbURL, "MARLOWE_REDIS_URL": rs.URL()}
	b := startQA(t, qaOpts{env: extra, slackCfg: slackfake.Config{Channels: map[string]string{qaAliceDM: "im", qaBobDM: "im"}}})

	b.model.Enqueue(llmtest.Tools(llmtest.Call("c1", "remember", `{"text":"`+forgetNote+`"}`)), llmtest.Text("Noted: "+forgetNote+"."))
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" remember that "+forgetNote)
	b.waitPost("Alice's note", hasText("Noted: "+forgetNote))
	b.waitIdle()
	b.model.Enqueue(llmtest.Text("You said: " + forgetOther))
	b.slack.Say(qaOther, "", qaAlice, b.mention+" "+forgetOther)
	b.waitPost("the answer in the other channel", hasText("You said: "+forgetOther))
	b.waitIdle()
	b.model.Enqueue(llmtest.Text("Will do: " + forgetPrivate))
	b.slack.Say(qaPrivate, "", qaAlice, b.mention+" "+forgetPrivate)
	b.waitPost("the answer in the private channel", hasText("Will do: "+forgetPrivate))
	b.waitIdle()
	b.model.Enqueue(llmtest.Tools(llmtest.Call("c2", "remember", `{"text":"`+bobNote+`"}`)), llmtest.Text("Noted, Bob."))
	b.slack.Say(qaGeneral, "", qaBob, b.mention+" remember that "+bobNote)
	b.waitPost("Bob's note", hasText("Noted, Bob."))
	b.waitIdle()

	// Exports: uploaded into each asker's DM, each holding only their data.
	export := func(dm, user string) engine.Export {
		t.Helper()
		before := len(b.slack.Files())
		b.slack.Say(dm, "", user, "export my data")
		b.waitPost("the export's reply in "+dm, func(p slackfake.Post) bool {
			return p.Channel == dm && strings.Contains(p.Text, "Here is everything I keep about you")
		})
		files := b.slack.Files()
		if len(files) != before+1 || files[before].Channel != dm || !strings.HasSuffix(files[before].Name, ".json") {
			t.Fatalf("export for %s: files %+v", user, files[before:])
		}
		var ex engine.Export
		if err := json.Unmarshal(files[before].Content, &ex); err != nil {
			t.Fatalf("export for %s is not JSON: %v", user, err)
		}
		if ex.User != user {
			t.Fatalf("export for %s names user %s", user, ex.User)
		}
		return ex
	}
	dump := func(ex engine.Export) string { j, _ := json.Marshal(ex.Channels); return string(j) }
	alice, bob := export(qaAliceDM, qaAlice), export(qaBobDM, qaBob)
	for _, w := range append([]string{"zebrafjord 7731"}, aliceWords...) {
		if !strings.Contains(dump(alice), w) {
			t.Errorf("Alice's export lacks %q: %s", w, dump(alice))
		}
		if strings.Contains(dump(bob), w) {
			t.Errorf("Bob's export holds Alice's %q: %s", w, dump(bob))
		}
	}
	if !strings.Contains(dump(bob), bobNote) || strings.Contains(dump(alice), "coffee") {
		t.Errorf("exports: Bob's %s\nAlice's %s", dump(bob), dump(alice))
	}
	msgs := 0
	for _, ch := range alice.Channels {
		msgs += len(ch.Messages)
	}
	if msgs != 4 { // three in channels, and her export request
		t.Errorf("Alice's export holds %d messages, want 4: %s", msgs, dump(alice))
	}

	// Attacks: Bob asks to forget Alice; Bob clicks her card.
	b.slack.Say(qaBobDM, "", qaBob, "forget <@"+qaAlice+">")
	b.waitPost("Bob's refusal", func(p slackfake.Post) bool {
		return p.Channel == qaBobDM && strings.Contains(p.Text, "Only an operator")
	})
	b.slack.Say(qaAliceDM, "", qaAlice, "forget me")
	card := b.waitPost("the forget card", func(p slackfake.Post) bool {
		return p.Channel == qaAliceDM && strings.Contains(string(p.Blocks), "erase")
	})
	btn := cardButtons(t, card.Blocks)
	click := func(user string) {
		b.slack.PushInteraction(b.slack.BlockActionsJSON(slackfake.Click{
			Channel: qaAliceDM, MessageTS: card.TS, ThreadTS: card.ThreadTS, User: user, UserName: user, ActionID: "erase", Value: btn["erase"], Label: "Erase",
		}))
	}
	click(qaBob)
	b.waitEphemeral("the refusal of Bob's click", func(e slackfake.Ephemeral) bool {
		return e.User == qaBob && strings.Contains(e.Text, "who asked, can confirm")
	})
	if hits := pgHolding(t, dbURL, holdsAny([]string{"command.redacted"})); len(hits) != 0 {
		t.Fatalf("something was redacted before Alice confirmed: %v", hits)
	}

	click(qaAlice)
	reply := b.waitPost("the erasure's reply", func(p slackfake.Post) bool {
		return p.Channel == qaAliceDM && strings.Contains(p.Text, "Erased your messages and notes")
	}).Text
	for _, want := range []string{"<#" + qaGeneral + ">", "<#" + qaOther + ">", "<#" + qaPrivate + ">", "1 memory erased", "What remains"} {
		if !strings.Contains(reply, want) {
			t.Errorf("the reply lacks %q:\n%s", want, reply)
		}
	}
	b.waitIdle()
	scanRedisFor(t, rs.URL(), holdsAny(aliceWords))
	b.stop()
	check := func(when string) {
		t.Helper()
		for _, hit := range pgHolding(t, dbURL, holdsAny(aliceWords)) {
			t.Errorf("%s: %s holds Alice's words", when, hit)
		}
		if hits := pgHolding(t, dbURL, holdsAny([]string{"coffee machine"})); len(hits) == 0 {
			t.Errorf("%s: Bob's note is gone too", when)
		}
	}
	check("after forget me")

	vars := map[string]string{"MARLOWE_DATA_DIR": b.dir}
	for k, v := range extra {
		vars[k] = v
	}
	if out, err := runBot(t, env(vars), "", "verify"); err != nil {
		t.Fatalf("verify after forget me: %v %s", err, out)
	}
	for _, ch := range []string{qaGeneral, qaOther, qaPrivate} {
		out, err := runBot(t, env(vars), "", "replay", "--channel", "slack/"+b.slack.Config().TeamID+"/"+ch)
		if err != nil {
			t.Fatalf("replay %s: %v %s", ch, err, out)
		}
		if holdsAny(aliceWords)(out) {
			t.Errorf("bot replay of %s prints Alice's words:\n%s", ch, out)
		}
		var st fold.ChannelState
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		if st.Counts["command.redacted"] < 2 || len(st.Redacted) != st.Counts["command.redacted"] {
			t.Errorf("replay of %s: %d command.redacted, %d redacted seqs", ch, st.Counts["command.redacted"], len(st.Redacted))
		}
	}
	if out, err := runBot(t, env(vars), "", "memory", "rebuild", "--all"); err != nil {
		t.Fatalf("memory rebuild: %v %s", err, out)
	}
	check("after bot memory rebuild --all")
}
