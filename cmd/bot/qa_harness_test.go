package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// QA people and rooms. Every scenario gets its own fake Slack, fake model
// and data dir, so scenarios run in parallel.
const (
	qaGeneral = "C0QAGENRL1"
	qaOther   = "C0QAOTHER1"
	qaPrivate = "C0QAPRIVT1" // a private channel with a C id (Slack since 2021)
	qaMPIM    = "G0QAMPIM01"
	qaDM      = "D0QADIRCT1"
	qaAlice   = "U0QAALICE1"
	qaBob     = "U0QABOB001"
	qaCarol   = "U0QACAROL1"
)

// qaBot is one running `bot serve` against its own fakes.
type qaBot struct {
	t       *testing.T
	slack   *slackfake.Server
	model   *llmtest.OpenAIServer
	dir     string
	logs    *syncBuffer
	mention string
	httpURL string // http mode: the bot's base URL

	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

type qaOpts struct {
	env      map[string]string // extra or overriding variables
	http     bool              // MARLOWE_SLACK_MODE=http
	slackCfg slackfake.Config
	noEcho   bool
}

const qaSecret = "qa-signing-secret"

func startQA(t *testing.T, o qaOpts) *qaBot {
	t.Helper()
	cfg := o.slackCfg
	cfg.EchoPosts = !o.noEcho
	if cfg.Channels == nil {
		cfg.Channels = map[string]string{}
	}
	for ch, kind := range map[string]string{qaGeneral: "channel", qaOther: "channel", qaPrivate: "group", qaMPIM: "mpim", qaDM: "im"} {
		if _, ok := cfg.Channels[ch]; !ok {
			cfg.Channels[ch] = kind
		}
	}
	if cfg.Users == nil {
		cfg.Users = []slackfake.User{
			{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}, {ID: qaCarol, Name: "carol"},
		}
	}
	sl := slackfake.New(cfg)
	t.Cleanup(sl.Close)
	model := llmtest.NewOpenAIServer(t)
	dir := t.TempDir()
	vars := map[string]string{
		"MARLOWE_DATA_DIR":          dir,
		"MARLOWE_HTTP_ADDR":         "127.0.0.1:0",
		"SLACK_BOT_TOKEN":           "xoxb-qa-token",
		"SLACK_APP_TOKEN":           "xapp-qa-token",
		"MARLOWE_SLACK_API_URL":     sl.APIURL(),
		"MARLOWE_MODEL_PROVIDER":    "openai",
		"MARLOWE_MODEL":             "fake-model",
		"MARLOWE_MODEL_BASE_URL":    model.URL,
		"MARLOWE_MODEL_MAX_RETRIES": "0",
		"MARLOWE_LOG_LEVEL":         "debug",
		"MARLOWE_ADMINS":            "slack:" + qaAlice, // an operator: policy changes need an admin
	}
	if o.http {
		vars["MARLOWE_SLACK_MODE"] = "http"
		vars["SLACK_SIGNING_SECRET"] = qaSecret
		delete(vars, "SLACK_APP_TOKEN")
	}
	maps.Copy(vars, o.env)
	b := &qaBot{t: t, slack: sl, model: model, dir: dir, logs: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	b.cancel = cancel
	go func() { b.done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, b.logs) }()
	t.Cleanup(b.stop)
	b.mention = "<@" + sl.Config().BotUserID + ">"
	if o.http {
		re := regexp.MustCompile(`health=http://(\S+)/healthz`)
		for deadline := time.Now().Add(qaStartTimeout); ; time.Sleep(10 * time.Millisecond) {
			if m := re.FindStringSubmatch(b.logs.String()); m != nil {
				b.httpURL = "http://" + m[1]
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("http mode: no listening address in the logs:\n%s", b.logs.String())
			}
		}
		// Wait for the adapter's Run (auth.test) so deliveries are accepted.
		for deadline := time.Now().Add(qaStartTimeout); !strings.Contains(b.logs.String(), "slack: connected as bot user"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("http mode: the adapter never started:\n%s", b.logs.String())
			}
		}
	} else if !sl.WaitConnected(qaStartTimeout) {
		t.Fatalf("the bot never opened a Socket Mode connection:\n%s", b.logs.String())
	}
	return b
}

// qaStartTimeout bounds a bot's start (migrations, connections) in QA.
const qaStartTimeout = 30 * time.Second

// stop ends serve and checks it returned cleanly and in time.
func (b *qaBot) stop() {
	if b.stopped {
		return
	}
	b.stopped = true
	b.cancel()
	select {
	case err := <-b.done:
		if err != nil {
			b.t.Errorf("serve returned %v\n%s", err, b.logs.String())
		}
	case <-time.After(15 * time.Second):
		b.t.Errorf("serve did not stop within 15s\n%s", b.logs.String())
	}
}

// waitPost waits for a post matching match and returns it.
func (b *qaBot) waitPost(what string, match func(slackfake.Post) bool) slackfake.Post {
	b.t.Helper()
	return b.waitPostFor(10*time.Second, what, match)
}

func (b *qaBot) waitPostFor(d time.Duration, what string, match func(slackfake.Post) bool) slackfake.Post {
	b.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, p := range b.slack.Posts() {
			if match(p) {
				return p
			}
		}
	}
	var calls []string
	for _, c := range b.slack.Calls() {
		calls = append(calls, c.Method+":"+itoa(uint64(c.Status)))
	}
	b.t.Fatalf("no post for %s; posts:\n%s\ncalls: %v\nupdates: %d\nlogs:\n%s", what, b.dumpPosts(), calls, len(b.slack.Updates()), b.logs.String())
	return slackfake.Post{}
}

func (b *qaBot) dumpPosts() string {
	var sb strings.Builder
	for _, p := range b.slack.Posts() {
		txt := p.Text
		if len(txt) > 160 {
			txt = txt[:160] + "…"
		}
		sb.WriteString("  " + p.Channel + " ts=" + p.TS + " thread=" + p.ThreadTS + " " + strings.ReplaceAll(txt, "\n", "⏎") + "\n")
	}
	return sb.String()
}

func (b *qaBot) count(match func(slackfake.Post) bool) int {
	n := 0
	for _, p := range b.slack.Posts() {
		if match(p) {
			n++
		}
	}
	return n
}

// quiet checks that nothing matching match is posted for d.
func (b *qaBot) quiet(what string, d time.Duration, match func(slackfake.Post) bool) {
	b.t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, p := range b.slack.Posts() {
			if match(p) {
				b.t.Fatalf("%s: unexpected post %q in %s/%s\nposts:\n%s\nlogs:\n%s", what, p.Text, p.Channel, p.ThreadTS, b.dumpPosts(), b.logs.String())
			}
		}
	}
}

// settles waits, up to limit, for a span of quiet with no new post matching
// match, and fails when the matching posts never stop.
func (b *qaBot) settles(what string, quiet, limit time.Duration, match func(slackfake.Post) bool) {
	b.t.Helper()
	count := func() (n int) {
		for _, p := range b.slack.Posts() {
			if match(p) {
				n++
			}
		}
		return n
	}
	seen, since := count(), time.Now()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n := count(); n != seen {
			seen, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
	b.t.Fatalf("%s: matching posts never stopped within %s (%d so far)\nposts:\n%s\nlogs:\n%s", what, limit, seen, b.dumpPosts(), b.logs.String())
}

// inChannel matches any post in ch.
func inChannel(ch string) func(slackfake.Post) bool {
	return func(p slackfake.Post) bool { return p.Channel == ch }
}

func hasText(s string) func(slackfake.Post) bool {
	return func(p slackfake.Post) bool { return strings.Contains(p.Text, s) }
}

// answers matches the bot's posts in ch's thread (thread "" = top level).
func inThread(ch, thread string) func(slackfake.Post) bool {
	return func(p slackfake.Post) bool { return p.Channel == ch && p.ThreadTS == thread }
}

// waitAcked waits until Slack got an ack for every event id.
func (b *qaBot) waitAcked(ids ...string) {
	b.t.Helper()
	for _, id := range ids {
		if !b.slack.WaitEventAcked(id, 5*time.Second) {
			b.t.Fatalf("event %s was never acknowledged (attempts %d)\nlogs:\n%s", id, b.slack.Attempts(id), b.logs.String())
		}
	}
}

// journal stops the bot and replays channel ch from its journal.
func (b *qaBot) journal(ch string) fold.ChannelState {
	b.t.Helper()
	b.stop()
	out, err := runBot(b.t, env(map[string]string{"MARLOWE_DATA_DIR": b.dir}), "", "replay", "--channel", "slack/"+b.slack.Config().TeamID+"/"+ch)
	if err != nil && strings.Contains(err.Error()+out, "no commands in this channel") {
		return fold.ChannelState{Counts: map[string]int{}}
	}
	if err != nil {
		b.t.Fatalf("replay %s: %v %s", ch, err, out)
	}
	var st fold.ChannelState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		b.t.Fatal(err)
	}
	return st
}

// verify stops the bot and runs `bot verify`.
func (b *qaBot) verify() {
	b.t.Helper()
	b.stop()
	if out, err := runBot(b.t, env(map[string]string{"MARLOWE_DATA_DIR": b.dir}), "", "verify"); err != nil {
		b.t.Fatalf("verify: %v %s", err, out)
	}
}

// msgEvent builds a message event with overrides (nil values delete keys).
func (b *qaBot) msgEvent(channel, user, text, ts, thread string, over map[string]any) map[string]any {
	ev := b.slack.MessageEvent(channel, user, text, ts, thread)
	for k, v := range over {
		if v == nil {
			delete(ev, k)
		} else {
			ev[k] = v
		}
	}
	return ev
}

// postSigned POSTs a signed request to the bot's HTTP server.
func (b *qaBot) postSigned(path, contentType string, body []byte, at time.Time, secret string, hdr map[string]string) *http.Response {
	b.t.Helper()
	req, err := slackfake.SignedRequest(b.httpURL+path, secret, at, contentType, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res
}

// runConcurrently runs each scenario as a subtest, all at once: they wait on
// timers and fakes, not CPU, so -parallel (GOMAXPROCS) need not bound them.
// qaParallel bounds how many QA bots run at once.
const qaParallel = 4

func runConcurrently(t *testing.T, subs map[string]func(*testing.T)) {
	t.Helper()
	// Each subtest runs a whole bot: a few at a time, so a 2-core machine
	// under -race starts each one in seconds rather than all at once.
	sem := make(chan struct{}, qaParallel)
	var wg sync.WaitGroup
	for name, fn := range subs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(name, fn)
		})
	}
	wg.Wait()
}

// waitChecklist waits until the checklist of the run in thread (the bot's
// first post there) says want, e.g. "✅ Done" (any of several, split by |).
func (b *qaBot) waitChecklist(ch, thread, want string) {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, p := range b.slack.Posts() {
			if p.Channel == ch && p.ThreadTS == thread {
				m, _ := b.slack.Message(ch, p.TS)
				for _, w := range strings.Split(want, "|") {
					if strings.Contains(m.Text, w) {
						return
					}
				}
				break
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the checklist in %s/%s never said %q\nposts:\n%s", ch, thread, want, b.dumpPosts())
		}
	}
}

// waitLog waits until the bot's log contains s.
func (b *qaBot) waitLog(s string) {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(b.logs.String(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.t.Fatalf("the log never said %q:\n%s", s, b.logs.String())
		}
	}
}

// waitIdle waits until every run the log shows started has finished (and
// nothing new started for a moment).
func (b *qaBot) waitIdle() {
	b.t.Helper()
	stable := 0
	for deadline := time.Now().Add(15 * time.Second); stable < 10; time.Sleep(30 * time.Millisecond) {
		l := b.logs.String()
		started := strings.Count(l, `msg="run started"`)
		ended := strings.Count(l, `msg="run completed"`) + strings.Count(l, `msg="run ended"`) + strings.Count(l, `msg="run paused"`)
		if started == ended {
			stable++
		} else {
			stable = 0
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("runs still going (%d started, %d ended):\n%s", started, ended, l)
		}
	}
}
