package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram"
	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// The real binary answers a mention in a Telegram group; the Bot API
// performs the answer's sendMessage but its response is lost, and the
// process is SIGKILLed before it could learn the outcome. After a restart
// the resumed run cannot ask Telegram whether the answer landed (the Bot
// API has no history read), so it sends it again with the visible
// "(resent after a restart)" marker: the answer is never left out, and a
// second copy never comes without the marker.
func TestTelegramLostSendThenKillResendsMarked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and SIGKILLs it (-short skips it)")
	}
	t.Parallel()
	c := startTelegramCrash(t)
	tg, r, wait, polling := c.tg, c.r, c.wait, c.polling

	const word = "lostzq1"
	isAnswer := func(s telegramfake.Sent) bool {
		return strings.Contains(s.Text, "You said:") && strings.Contains(s.Text, word)
	}
	tg.LoseResponses("sendMessage", 1000) // every send lands; no answer comes back
	tg.Inject(telegramfake.Incoming{Chat: trGroup, From: tgAlice, Text: "@" + tg.Config().Username + " please echo " + word})
	wait("the answer sent (its response lost)", 60*time.Second, func() bool { return countSent(tg, isAnswer) >= 1 })
	r.kill()
	tg.LoseResponses("sendMessage", 0)

	r.start()
	wait("the restarted bot polling", qaStartTimeout, func() bool { return polling() >= 2 })
	wait("the answer resent after the restart", 120*time.Second, func() bool {
		return countSent(tg, func(s telegramfake.Sent) bool { return isAnswer(s) && strings.Contains(s.Text, telegram.ResentMarker) }) >= 1
	})
	var unmarked int
	for _, s := range tg.Sent() {
		if isAnswer(s) && !strings.Contains(s.Text, telegram.ResentMarker) {
			unmarked++
		}
	}
	// The first copy is unmarked only when it was sent by a first drive: a
	// post lost earlier in the run (its checklist) already makes the drive
	// that sends the answer a resumed one, and then every copy is marked.
	if unmarked > 1 {
		var texts []string
		for _, s := range tg.Sent() {
			texts = append(texts, s.Text)
		}
		t.Fatalf("%d unmarked copies of the answer, want at most one; sent %q", unmarked, texts)
	}
}

// The real binary is SIGKILLed while the model is still working on a
// Telegram mention, before the answer's sendMessage was ever attempted.
// After a restart the resumed run finds no message.attempted for the
// answer's key, so it sends it plain: one copy, without the "(resent after
// a restart)" marker, since no earlier copy can exist. (Before the attempt
// record, every post of a resumed run was marked.)
func TestTelegramKillBeforeSendResendsUnmarked(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and SIGKILLs it (-short skips it)")
	}
	t.Parallel()
	c := startTelegramCrash(t)
	tg, r, model, wait, polling := c.tg, c.r, c.model, c.wait, c.polling

	const word = "unsentzq2"
	isAnswer := func(s telegramfake.Sent) bool {
		return strings.Contains(s.Text, "You said:") && strings.Contains(s.Text, word)
	}
	model.Enqueue(llmtest.Hang()) // the first model call never returns
	tg.Inject(telegramfake.Incoming{Chat: trGroup, From: tgAlice, Text: "@" + tg.Config().Username + " please echo " + word})
	wait("the model asked about the mention", 60*time.Second, func() bool {
		for _, q := range model.Requests() {
			if strings.Contains(string(q.Body), word) {
				return true
			}
		}
		return false
	})
	r.kill()
	if n := countSent(tg, isAnswer); n != 0 {
		t.Fatalf("%d answers sent before the kill, want none (the model was still working)", n)
	}

	r.start()
	wait("the restarted bot polling", qaStartTimeout, func() bool { return polling() >= 2 })
	wait("the answer after the restart", 120*time.Second, func() bool { return countSent(tg, isAnswer) >= 1 })
	waitRunsEnded(t, c.dbURL, r.logs.String)
	var texts []string
	for _, s := range tg.Sent() {
		if isAnswer(s) {
			texts = append(texts, s.Text)
		}
	}
	if len(texts) != 1 || strings.Contains(texts[0], telegram.ResentMarker) {
		t.Fatalf("answers sent %q, want exactly one, unmarked (it was never sent before)", texts)
	}
}

// telegramCrash is the real binary polling a Telegram fake, on its own
// Postgres database and Redis, with a model fake that answers after 50 ms.
type telegramCrash struct {
	t     *testing.T
	dbURL string
	tg    *telegramfake.Server
	model *llmtest.OpenAI
	r     *replicaProc
}

// startTelegramCrash starts it and waits until it polls.
func startTelegramCrash(t *testing.T) *telegramCrash {
	t.Helper()
	c := &telegramCrash{t: t, dbURL: testpg.New(t)}
	rs := testredis.StartServer(t)
	c.tg = telegramfake.New(telegramfake.Config{})
	t.Cleanup(c.tg.Close)
	var modelURL string
	c.model, modelURL = slowModelFake(t, 50*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	c.r = &replicaProc{t: t, bin: bin, name: "r0", logs: &syncBuffer{},
		env: telegramReplicaEnv(t.TempDir(), "r0", c.dbURL, rs.URL(), key, c.tg, modelURL)}
	c.r.start()
	t.Cleanup(c.r.kill)
	c.wait("the bot polling", qaStartTimeout, func() bool { return c.polling() >= 1 })
	return c
}

// polling counts the bot's "holding the poller lease" lines: one a start.
func (c *telegramCrash) polling() int { return strings.Count(c.r.logs.String(), trPolls) }

// wait polls cond (some conditions read the logs, not only the fake) until
// it holds, failing the test after d.
func (c *telegramCrash) wait(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			c.t.Fatalf("timed out waiting for %s\n%s", what, c.r.logs.String())
		case <-tick.C:
		}
	}
}
