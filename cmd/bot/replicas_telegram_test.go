package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/adapters/telegram"
	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// Several replicas of the real binary against the fake Bot API in polling
// mode: Telegram allows one getUpdates caller per token, so one replica,
// elected through the lease table, polls and journals; the channel's owner
// (possibly the other replica) answers.

var (
	trGroup = telegramfake.Chat{ID: -1003001, Type: "supergroup", Title: "eng"}
	trForum = telegramfake.Chat{ID: -1003002, Type: "supergroup", Title: "ops", IsForum: true}
	trDMs   = []telegramfake.User{
		{ID: 601, FirstName: "Dan", Username: "dan"}, {ID: 602, FirstName: "Erin", Username: "erin"},
		{ID: 603, FirstName: "Frank", Username: "frank"}, {ID: 604, FirstName: "Grace", Username: "grace"},
		{ID: 605, FirstName: "Heidi", Username: "heidi"}, {ID: 606, FirstName: "Ivan", Username: "ivan"},
	}
)

const (
	trTopic  = 42
	trOps    = -1003005 // where the approved post goes
	trPoller = "telegram-poller:123456"
	trPolls  = "telegram: holding the poller lease"
)

// telegramReplicaEnv is replicaEnv with Telegram (polling) in place of Slack.
func telegramReplicaEnv(dir, name, dbURL, redisURL, key string, tg *telegramfake.Server, modelURL string, extra ...string) []string {
	var env []string
	for _, kv := range replicaEnv(dir, name, dbURL, redisURL, key, "", modelURL, extra...) {
		if !strings.HasPrefix(kv, "SLACK_") && !strings.HasPrefix(kv, "MARLOWE_SLACK_") {
			env = append(env, kv)
		}
	}
	return append(env, "TELEGRAM_BOT_TOKEN="+tg.Config().Token, "MARLOWE_TELEGRAM_API_URL="+tg.URL())
}

// poller is the index of the replica holding the live poller lease, or -1.
func poller(t *testing.T, dbURL string, reps []*replicaProc) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var holder string
	err = conn.QueryRow(t.Context(), `SELECT holder FROM leases WHERE name = $1 AND holder <> '' AND expires_at > now()`, trPoller).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		if strings.HasPrefix(holder, r.name+"-") {
			return i
		}
	}
	t.Fatalf("poller lease holder %q is none of the replicas", holder)
	return -1
}

// TestReplicasAnswerEachTelegramMessageOnceThroughKills: two replicas, one
// of them polling (elected through the lease table; its lease lapses 15 s
// after its holder dies, fixed: electionTTL). 24 addressed messages
// (mentions in a group and in a forum topic, messages in six private
// chats), 6 untagged follow-ups from a person the bot just answered in the
// group, and chatter from someone never addressed among them. The poller
// is SIGKILLed mid-stream (it also owns the channels): messages queue at
// Telegram while nobody polls, the other replica takes polling over once
// the lease lapses, then the killed one restarts. Later the poller is
// stalled (SIGSTOP) until the restarted replica has taken its channels
// over, and resumed: it keeps polling and journaling while the other
// replica owns the channels and answers. Every addressed message and
// follow-up is answered exactly once, as a reply to it, chatter never,
// nothing is posted twice, no run ends twice, every update is confirmed,
// `bot verify` passes. Then one approval click, received by the poller on
// a card the other replica drives, is decided once.
func TestReplicasAnswerEachTelegramMessageOnceThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs two replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	// Privacy mode off, so the group's chatter reaches the bot (and must be
	// ignored) and untagged follow-ups do too.
	tg := telegramfake.New(telegramfake.Config{ReadAllGroupMessages: true})
	t.Cleanup(tg.Close)
	model, modelURL := slowModelFake(t, 300*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	dump := func() string { return dumpLogs(reps) }
	await := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		// Polled: conditions read the database and the logs, not only the
		// fake (whose Wait wakes on its own changes).
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s\n%s", what, dump())
			case <-tick.C:
			}
		}
	}
	for i := range 2 {
		name := fmt.Sprintf("r%d", i)
		r := &replicaProc{t: t, bin: bin, name: name, logs: &syncBuffer{},
			env: telegramReplicaEnv(t.TempDir(), name, dbURL, rs.URL(), key, tg, modelURL, "MARLOWE_LEASE_TTL=2s")}
		reps = append(reps, r)
		r.start()
		t.Cleanup(r.kill)
		// The first runs the migrations alone.
		await(name+" connected", qaStartTimeout, func() bool { return strings.Contains(r.logs.String(), "telegram: connected as bot") })
	}
	await("a poller", qaStartTimeout, func() bool { return poller(t, dbURL, reps) >= 0 })

	at := "@" + tg.Config().Username
	isAnswer := func(s telegramfake.Sent, word string) bool {
		return strings.Contains(s.Text, "You said:") && strings.Contains(s.Text, word)
	}
	// answered counts an answer's copies, and its unmarked ones. A resumed
	// run's post whose send was attempted (message.attempted) carries
	// telegram.ResentMarker: the Bot API cannot tell whether a send whose
	// message.posted never committed went out (the
	// stalled poller's transaction, ended by the server while it was
	// frozen, can be one). docs/telegram.md promises no gap and never an
	// unmarked second copy.
	answered := func(word string) (copies, unmarked int) {
		for _, s := range tg.Sent() {
			if isAnswer(s, word) {
				copies++
				if !strings.Contains(s.Text, telegram.ResentMarker) {
					unmarked++
				}
			}
		}
		return copies, unmarked
	}
	waitAnswer := func(word string) telegramfake.Sent {
		t.Helper()
		var found telegramfake.Sent
		// Up to a poller takeover (the election's 15 s TTL plus a retry)
		// and, if the kill landed between a claim and its commit, the
		// dedupe claim's 60 s lapse.
		ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
		defer cancel()
		if err := tg.Wait(ctx, func() bool {
			for _, s := range tg.Sent() {
				if isAnswer(s, word) {
					found = s
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatalf("%s never answered\n%s", word, dump())
		}
		return found
	}

	type sent struct {
		chat   telegramfake.Chat
		topic  int64
		msgID  int64
		inDM   bool
		answer string
	}
	var want []sent
	say := func(chat telegramfake.Chat, topic int64, from telegramfake.User, text, word string) {
		_, id := tg.Inject(telegramfake.Incoming{Chat: chat, Topic: topic, From: from, Text: text})
		want = append(want, sent{chat: chat, topic: topic, msgID: id, inDM: chat.Type == "private", answer: word})
	}
	chatter := func(chat telegramfake.Chat, topic int64, i int) {
		for k := range 2 {
			tg.Inject(telegramfake.Incoming{Chat: chat, Topic: topic, From: tgCarol, Text: fmt.Sprintf("chatter cx%03d-%02d among people", i, k)})
		}
	}
	// An untagged message from Alice, whom the bot answered in the group
	// (her mentions are every fourth message): a follow-up in her window.
	followUp := func(i int) {
		waitAnswer(fmt.Sprintf("zq%03d", i))
		fu := fmt.Sprintf("fu%03d", i)
		say(trGroup, 0, tgAlice, "and a follow-up "+fu, fu)
	}

	const messages = 24
	killed, survivor := -1, -1
	var before, restartedPolls int // poller log lines: the survivor's before the kill, the killed one's at its restart
	var stallMark string
	for i := range messages {
		word := fmt.Sprintf("zq%03d", i)
		switch i % 4 {
		case 0:
			say(trGroup, 0, tgAlice, at+" please echo "+word, word)
			chatter(trGroup, 0, i)
		case 1:
			say(trForum, trTopic, tgBob, at+" please echo "+word, word)
			chatter(trForum, trTopic, i)
		case 2:
			// One message per private chat: a DM has no threads, so a
			// second one there would steer the first's run.
			dm := trDMs[i/4]
			say(telegramfake.Chat{ID: dm.ID, Type: "private"}, 0, dm, "please echo "+word, word)
		case 3:
			say(trForum, trTopic, tgAlice, at+" please echo "+word, word)
			chatter(trForum, trTopic, i)
		}
		switch i {
		case 5, 13, 17, 22:
			followUp(i - 5 - (i-5)%4)
		case 8:
			// SIGKILL the poller while runs are in flight; what follows
			// queues at Telegram until the other replica polls.
			killed = poller(t, dbURL, reps)
			if killed < 0 {
				t.Fatalf("nobody holds the poller lease\n%s", dump())
			}
			survivor = 1 - killed
			before = strings.Count(reps[survivor].logs.String(), trPolls)
			reps[killed].kill()
		case 9:
			followUp(4) // sent while nobody polls (if its answer came before the kill)
		case 11:
			// The other replica takes polling over; only then does the
			// killed one come back (so it cannot win the election first).
			await("the survivor polling", 60*time.Second, func() bool {
				return strings.Count(reps[survivor].logs.String(), trPolls) > before && poller(t, dbURL, reps) == survivor
			})
			restartedPolls = strings.Count(reps[killed].logs.String(), trPolls)
			reps[killed].start()
			await("the restarted replica connected", qaStartTimeout, func() bool {
				return strings.Count(reps[killed].logs.String(), "telegram: connected as bot") == 2
			})
		case 18:
			// Stall the poller (SIGSTOP) with answers in flight: its
			// channel leases (2 s) lapse and the restarted replica takes
			// them over, while the poller lease (15 s) outlasts the stall.
			// After SIGCONT the same replica polls and journals, and the
			// other owns the channels: woken by NOTIFY, it answers. The
			// stalled one must not post what it had under way.
			stallMark = fmt.Sprintf("==== stalled %s\n", reps[survivor].name)
			fmt.Fprint(reps[killed].logs, stallMark)
			if err := reps[survivor].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		case 20:
			await("the channels taken over from the stalled poller", 20*time.Second, func() bool {
				_, after, _ := strings.Cut(reps[killed].logs.String(), stallMark)
				took := func(ch string) bool {
					return strings.Contains(after, `took over a lapsed channel" channel=telegram//`+ch+" ")
				}
				return took(fmt.Sprint(trGroup.ID)) && took(fmt.Sprintf("%d:%d", trForum.ID, trTopic))
			})
			if err := reps[survivor].cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if p := poller(t, dbURL, reps); p != survivor {
				t.Fatalf("the poller lease moved to %d during the stall (it outlasts it: 15 s)\n%s", p, dump())
			}
		}
		time.Sleep(50 * time.Millisecond) // pacing, not a wait for an outcome
	}
	followUp(20)
	for _, w := range want {
		s := waitAnswer(w.answer)
		if s.ChatID != w.chat.ID || s.Topic != w.topic {
			t.Errorf("%s answered in chat %d topic %d, want chat %d topic %d", w.answer, s.ChatID, s.Topic, w.chat.ID, w.topic)
		}
		if !w.inDM && s.ReplyTo != w.msgID {
			t.Errorf("%s answered as a reply to %d, want to its message %d", w.answer, s.ReplyTo, w.msgID)
		}
	}
	waitRunsEnded(t, dbURL, dump)
	await("every update confirmed", 30*time.Second, func() bool { return len(tg.Pending()) == 0 })

	if len(want) != messages+6 {
		t.Fatalf("%d messages to answer, want %d", len(want), messages+6)
	}
	for _, w := range want {
		if copies, unmarked := answered(w.answer); copies == 0 || unmarked > 1 {
			t.Errorf("%s answered %d times, %d of them unmarked: want at least once, and every copy after one marked", w.answer, copies, unmarked)
		}
	}
	// Nothing at all posted twice (answers, checklists): the same text as
	// a reply to the same message in the same place.
	type post struct {
		chat, topic, reply int64
		text               string
	}
	posts := map[post]int{}
	for _, s := range tg.Sent() {
		if strings.Contains(s.Text, "chatter cx") {
			t.Errorf("chatter was answered: %q", s.Text)
		}
		p := post{s.ChatID, s.Topic, s.ReplyTo, s.Text}
		if posts[p]++; posts[p] == 2 {
			t.Errorf("posted twice in chat %d topic %d as a reply to %d: %q", s.ChatID, s.Topic, s.ReplyTo, s.Text)
		}
	}
	if n := strings.Count(reps[killed].logs.String(), trPolls); n != restartedPolls {
		t.Errorf("the restarted replica polled (%d poller lines, %d before its restart): the stalled poller lost its lease", n, restartedPolls)
	}
	if p := poller(t, dbURL, reps); p != survivor {
		t.Errorf("the poller is r%d, want r%d still", p, survivor)
	}
	_, afterStall, _ := strings.Cut(reps[killed].logs.String(), stallMark)
	if !strings.Contains(afterStall, "run completed") {
		t.Errorf("the replica that took the channels over drove no run after the stall")
	}
	t.Logf("poller r%d killed, r%d took over; %d getUpdates refused as concurrent", killed, survivor, tg.Conflicts())

	// One approval click, through whichever replica polls now, decided
	// once: one approved post, one accepted decision, one answer to the
	// press.
	model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "post_to_channel", fmt.Sprintf(`{"channel":"%d","text":"relay report"}`, trOps))),
		llmtest.Text("Shared it, relay done."),
	)
	tg.Inject(telegramfake.Incoming{Chat: trGroup, From: tgAlice, Text: at + " share the report with the ops chat"})
	var card telegramfake.Sent
	await("the approval card", 60*time.Second, func() bool {
		for _, s := range tg.Sent() {
			if s.ChatID == trGroup.ID && len(s.Keyboard) > 0 {
				card = s
				return true
			}
		}
		return false
	})
	var approve string
	for _, row := range card.Keyboard {
		for _, b := range row {
			if l := strings.ToLower(b.Text); strings.Contains(l, "approve") || l == "allow once" {
				approve = b.CallbackData
			}
		}
	}
	if approve == "" {
		t.Fatalf("no approve button on the card: %+v", card.Keyboard)
	}
	_, qid := tg.Click(trGroup.ID, card.MessageID, tgAlice, approve)
	toOps := func(s telegramfake.Sent) bool { return s.ChatID == trOps }
	await("the approved post", 60*time.Second, func() bool { return countSent(tg, toOps) > 0 })
	await("the run's final answer", 60*time.Second, func() bool {
		return countSent(tg, func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "relay done") }) > 0
	})
	waitRunsEnded(t, dbURL, dump)
	await("every update confirmed", 30*time.Second, func() bool { return len(tg.Pending()) == 0 })
	if n := countSent(tg, toOps); n != 1 {
		t.Errorf("%d posts to the ops chat, want the approved one exactly once", n)
	}
	presses := func() int {
		n := 0
		for _, c := range tg.Calls() {
			if c.Method == "answerCallbackQuery" && c.Params.Get("callback_query_id") == qid {
				n++
			}
		}
		return n
	}
	// An accepted press is answered after a grace of up to 2 s (for a
	// refusal the engine may still send): awaited, and counted again once
	// the replicas have stopped.
	await("the press answered", 30*time.Second, func() bool { return presses() > 0 })
	if n := strings.Count(dump(), "outcome=accepted"); n != 1 {
		t.Errorf("the click was accepted %d times across the replicas, want 1", n)
	}
	// The split the stall left: the poller decided the click, the owner
	// drove the card and the approved post.
	if !strings.Contains(reps[survivor].logs.String(), "outcome=accepted") {
		t.Errorf("the click was not decided on the poller r%d", survivor)
	}
	if _, after, _ := strings.Cut(reps[killed].logs.String(), stallMark); !strings.Contains(after, "approval requested") {
		t.Errorf("the card was not driven by the channels' owner r%d", killed)
	}

	for _, r := range reps {
		r.stop()
	}
	if n := presses(); n != 1 {
		t.Errorf("the press was answered %d times, want 1", n)
	}
	verifyReplicas(t, bin, reps[survivor], dump)
}
