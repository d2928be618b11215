package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// Several replicas of the real binary on one Postgres and one Redis, with
// the fake Slack handing each envelope to one of their Socket Mode
// connections in turn, as Slack does.

type replicaProc struct {
	t    testing.TB
	bin  string
	env  []string
	name string
	logs *syncBuffer

	cmd    *exec.Cmd
	exited chan struct{}
}

func (r *replicaProc) start() {
	r.t.Helper()
	fmt.Fprintf(r.logs, "==== start %s\n", r.name)
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(r.exited) }()
}

func (r *replicaProc) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
	r.cmd = nil
	fmt.Fprintf(r.logs, "==== killed %s\n", r.name)
}

func (r *replicaProc) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		r.t.Errorf("replica %s did not stop on SIGTERM", r.name)
		r.kill()
	}
	r.cmd = nil
}

// replicaPoolConns caps each replica's database pools in these tests: three
// replicas at production pool sizes took over half of the test server's 100
// connections, beside the packages running in parallel.
const replicaPoolConns = 6

// replicaEnv is one replica's environment: its own data directory, the
// shared database, Redis, signing key, fake Slack and model; extra adds or
// overrides variables (the last of a name wins).
func replicaEnv(dir, name, dbURL, redisURL, key, slackURL, modelURL string, extra ...string) []string {
	return append([]string{
		"HOME=" + dir, "MARLOWE_DATA_DIR=" + dir, "MARLOWE_HTTP_ADDR=127.0.0.1:0",
		"MARLOWE_DATABASE_URL=" + testpg.Pooled(dbURL, replicaPoolConns), "MARLOWE_REDIS_URL=" + redisURL, key,
		"MARLOWE_REPLICA_ID=" + name,
		"SLACK_BOT_TOKEN=xoxb-qa", "SLACK_APP_TOKEN=xapp-qa", "MARLOWE_SLACK_API_URL=" + slackURL,
		"MARLOWE_MODEL_PROVIDER=openai", "MARLOWE_MODEL=fake", "MARLOWE_MODEL_BASE_URL=" + modelURL,
		"MARLOWE_MODEL_MAX_RETRIES=0", "MARLOWE_LOG_LEVEL=debug",
	}, extra...)
}

// dumpLogs is every replica's log, for a failure message.
func dumpLogs(reps []*replicaProc) string {
	var b strings.Builder
	for _, r := range reps {
		b.WriteString(r.logs.String())
	}
	return b.String()
}

// slowModel is the echo model with a delay, so that kills land mid-run.
func slowModel(t *testing.T, d time.Duration) string {
	_, url := slowModelFake(t, d)
	return url
}

// slowModelFake is slowModel with its fake, to queue scripted answers
// (tool calls) ahead of the echo.
func slowModelFake(t *testing.T, d time.Duration) (*llmtest.OpenAI, string) {
	f := llmtest.NewOpenAI()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { f.Release(); srv.Close() })
	return f, srv.URL + "/v1"
}

// TestReplicasAnswerEachMessageOnceThroughKills: three replicas and about
// 1,000 events (mentions with Slack's app_mention + message pairs,
// follow-ups, chatter, redeliveries); the replica owning the channels is
// SIGKILLed twice while runs are in flight (and restarted). Every
// mention and every follow-up in a thread window is answered exactly once,
// in its thread; chatter outside any window is never answered; redelivered
// events start nothing new; every run ends once; the journal verifies.
func TestReplicasAnswerEachMessageOnceThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs three replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	// Redeliveries span more than the adapter's 30 s delivery claim, as
	// Slack's do (its retries come over minutes): an event the killed
	// replica had claimed in the shared dedupe but not journaled is taken
	// by another replica once the dead claim lapses.
	sl := slackfake.New(slackfake.Config{EchoPosts: true, RedeliverAfter: 2 * time.Second, MaxRetries: 20,
		Channels: map[string]string{qaGeneral: "channel", qaOther: "channel"},
		Users:    []slackfake.User{{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}, {ID: qaCarol, Name: "carol"}}})
	t.Cleanup(sl.Close)
	modelURL := slowModel(t, 250*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	for i := range 3 {
		dir := t.TempDir()
		r := &replicaProc{t: t, bin: bin, name: fmt.Sprintf("r%d", i), logs: &syncBuffer{}, env: replicaEnv(dir, fmt.Sprintf("r%d", i), dbURL, rs.URL(), key, sl.APIURL(), modelURL, "MARLOWE_LEASE_TTL=2s")}
		reps = append(reps, r)
		r.start()
		t.Cleanup(r.kill)
		if i == 0 {
			// The first runs the migrations alone.
			waitConns(t, sl, 1, reps)
		}
	}
	waitConns(t, sl, 3, reps)
	dump := func() string { return dumpLogs(reps) }
	mention := "<@" + sl.Config().BotUserID + ">"
	answered := func(word string) int {
		n := 0
		for _, p := range sl.Posts() {
			if strings.Contains(p.Text, "You said:") && strings.Contains(p.Text, word) {
				n++
			}
		}
		return n
	}
	waitAnswer := func(word string) slackfake.Post {
		deadline := time.Now().Add(60 * time.Second)
		for {
			for _, p := range sl.Posts() {
				if strings.Contains(p.Text, "You said:") && strings.Contains(p.Text, word) {
					return p
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never answered\n%s", word, dump())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	const mentions, chatterPerMention = 36, 26
	events := 0
	roots := map[string]string{} // word → thread root
	var redelivered []string
	for i := range mentions {
		word := fmt.Sprintf("zq%03d", i)
		ch := []string{qaGeneral, qaOther}[i%2]
		root, ids := sl.Say(ch, "", []string{qaAlice, qaBob}[i%2], mention+" please echo "+word)
		roots[word] = ch + "/" + root
		events += len(ids)
		if i%5 == 0 && len(ids) > 0 {
			redelivered = append(redelivered, ids[0])
		}
		// Chatter outside any window (Carol is never answered at top
		// level): ignored, and the bulk of the ~1,000 events.
		for k := range chatterPerMention {
			_, cids := sl.Say(ch, "", qaCarol, fmt.Sprintf("chatter cx%03d-%02d among people", i, k))
			events += len(cids)
		}
		switch i {
		case 10, 24:
			// SIGKILL the replica that owns the channels while runs are
			// in flight, and restart it.
			time.Sleep(100 * time.Millisecond)
			r := reps[owner(t, dbURL, reps)]
			r.kill()
			r.start()
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range redelivered {
		sl.Redeliver(id)
		events++
	}
	// Follow-ups in each thread window once the first answer is there.
	for i := range mentions {
		word := fmt.Sprintf("zq%03d", i)
		p := waitAnswer(word)
		ch, root, _ := strings.Cut(roots[word], "/")
		if p.Channel != ch || p.ThreadTS != root {
			t.Errorf("%s answered in %s/%s, want its thread %s", word, p.Channel, p.ThreadTS, roots[word])
		}
		if i%3 == 0 {
			_, fids := sl.Say(ch, root, qaCarol, fmt.Sprintf("and a follow-up fu%03d", i))
			events += len(fids)
		}
	}
	for i := 0; i < mentions; i += 3 {
		waitAnswer(fmt.Sprintf("fu%03d", i))
	}
	waitRunsEnded(t, dbURL, dump)
	t.Logf("%d events delivered to %d replicas", events, len(reps))
	if events < 1000 {
		t.Errorf("only %d events: the scenario is meant to push about 1,000", events)
	}

	for i := range mentions {
		if n := answered(fmt.Sprintf("zq%03d", i)); n != 1 {
			t.Errorf("zq%03d answered %d times", i, n)
		}
		if i%3 == 0 {
			if n := answered(fmt.Sprintf("fu%03d", i)); n != 1 {
				t.Errorf("follow-up fu%03d answered %d times", i, n)
			}
		}
	}
	for _, p := range sl.Posts() {
		if strings.Contains(p.Text, "cx") && strings.Contains(p.Text, "chatter") {
			t.Errorf("chatter outside any window was answered: %q", p.Text)
		}
	}
	// A killed owner's channel passes to another process either by a
	// lease sweep ("took over a lapsed channel") or by the claim made for
	// the next mention there, which logs nothing; both bump the lease's
	// token, which only a change of holder does.
	if n := maxChannelLeaseToken(t, dbURL); n < 2 {
		t.Errorf("no channel lease changed hands (highest token %d): the kills missed the owner", n)
	}
	for _, r := range reps {
		r.stop()
	}
	verifyReplicas(t, bin, reps[1], dump)
}

// owner is the index of the replica holding the most channel leases.
// maxChannelLeaseToken is the highest fence token of any channel lease:
// 1 while every channel has had a single holder.
func maxChannelLeaseToken(t *testing.T, dbURL string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(t.Context(), `SELECT coalesce(max(token), 0) FROM leases WHERE name LIKE 'channel:%'`).Scan(&n); err != nil {
		t.Fatalf("read channel lease tokens: %v", err)
	}
	return n
}

func owner(t *testing.T, dbURL string, reps []*replicaProc) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var holder string
	err = conn.QueryRow(t.Context(), `SELECT holder FROM leases WHERE name LIKE 'channel:%' AND holder <> ''
		GROUP BY holder ORDER BY count(*) DESC LIMIT 1`).Scan(&holder)
	if err != nil {
		t.Fatalf("no channel lease held: %v", err)
	}
	for i, r := range reps {
		if strings.HasPrefix(holder, r.name+"-") {
			return i
		}
	}
	t.Fatalf("lease holder %q is none of the replicas", holder)
	return 0
}

func waitConns(t *testing.T, sl *slackfake.Server, n int, reps []*replicaProc) {
	t.Helper()
	deadline := time.Now().Add(qaStartTimeout)
	for sl.Connections() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Socket Mode connections, want %d\n%s", sl.Connections(), n, dumpLogs(reps))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRunsEnded waits until every run the journal started has ended, and
// checks none ended twice.
func waitRunsEnded(t *testing.T, dbURL string, dump func() string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(90 * time.Second)
	for {
		var started, open, twice int
		err := conn.QueryRow(t.Context(), `
			WITH ends AS (SELECT run, count(*) AS n FROM commands WHERE kind IN ('run.completed','run.failed') GROUP BY run)
			SELECT (SELECT count(*) FROM commands WHERE kind = 'run.started'),
			       (SELECT count(*) FROM commands s WHERE s.kind = 'run.started' AND NOT EXISTS (SELECT 1 FROM ends WHERE ends.run = s.run)),
			       (SELECT count(*) FROM ends WHERE n > 1)`).Scan(&started, &open, &twice)
		if err != nil {
			t.Fatal(err)
		}
		if twice > 0 {
			t.Fatalf("%d runs ended more than once\n%s", twice, dump())
		}
		if open == 0 && started > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs never ended\n%s", open, started, dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testSigningKey is a fresh base64 ed25519 seed: replicas share one key.
func testSigningKey(t testing.TB) string {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(priv.Seed())
}

// verifyReplicas runs `bot verify` with r's configuration, and prints every
// replica's log when the test failed.
func verifyReplicas(t *testing.T, bin string, r *replicaProc, dump func() string) {
	t.Helper()
	verify := exec.Command(bin, "verify")
	verify.Env = r.env
	if out, err := verify.CombinedOutput(); err != nil {
		t.Errorf("bot verify: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Logf("replica logs:\n%s", dump())
	}
}
