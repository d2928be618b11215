package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/adapters/slack"
	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestEverySubcommandAnswersHelp: `bot X --help` prints X's usage and exits
// 0 without reading configuration or touching the data directory.
func TestEverySubcommandAnswersHelp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	getenv := env(map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_LOG_LEVEL": "not-a-level"})
	cases := [][]string{
		{"serve", "--help"}, {"doctor", "--help"}, {"healthcheck", "--help"}, {"migrate", "--help"},
		{"verify", "--help"}, {"verify", "--channel", "x/y/z", "-h"}, {"keys", "--help"}, {"keys", "generate", "--help"},
		{"replay", "--help"}, {"memory", "--help"}, {"memory", "rebuild", "--help"}, {"intent", "replay", "--help"},
		{"version", "--help"}, {"help", "verify"},
	}
	for _, args := range cases {
		out, err := runBot(t, getenv, "", args...)
		cmd := args[0]
		if cmd == "help" {
			cmd = args[1]
		}
		if err != nil || !strings.HasPrefix(out, "Usage: bot "+cmd) {
			t.Errorf("bot %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for cmd := range commandUsage {
		if !strings.Contains(usage, "  "+cmd) {
			t.Errorf("bot --help does not list %s", cmd)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--help touched the data directory: %v", err)
	}
}

func TestVerifyUnknownChannelIsAnError(t *testing.T) {
	dir := t.TempDir()
	ch := seedJournal(t, dir, 2)
	getenv := env(map[string]string{"MARLOWE_DATA_DIR": dir})
	out, err := runBot(t, getenv, "", "verify", "--channel", "sandbox/local/genral")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "no channel sandbox/local/genral") || !strings.Contains(err.Error(), string(ch)) {
		t.Fatalf("verify of a typo: %q, %v", out, err)
	}
	if out, err := runBot(t, getenv, "", "verify", "--channel", string(ch)); err != nil || !strings.Contains(out, "ok: 2 commands") {
		t.Fatalf("verify of the real channel: %q, %v", out, err)
	}
}

func TestReembedWithoutEmbedderIsAnError(t *testing.T) {
	dir := t.TempDir()
	seedJournal(t, dir, 1)
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "memory", "rebuild", "--all", "--reembed")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "MARLOWE_EMBEDDING_MODEL") {
		t.Fatalf("--reembed without an embedder: %q, %v", out, err)
	}
}

// goFieldName is what encoding/json prints for an untagged exported field.
var goFieldName = regexp.MustCompile(`^[A-Z][A-Za-z]*$`)

// checkSnake fails for any object key that looks like a Go field name.
func checkSnake(t *testing.T, what string, v any, path string) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if goFieldName.MatchString(k) {
				t.Errorf("%s: key %q at %s is a Go field name, not snake_case", what, k, path)
			}
			checkSnake(t, what, e, path+"."+k)
		}
	case []any:
		for _, e := range x {
			checkSnake(t, what, e, path+"[]")
		}
	}
}

// TestJSONOutputIsSnakeCase: replay --channel, replay --run and doctor
// --json all print snake_case keys.
func TestJSONOutputIsSnakeCase(t *testing.T) {
	t.Parallel()
	b := startQA(t, qaOpts{})
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" hello there")
	b.waitPost("the answer", inChannel(qaGeneral))
	b.waitIdle()
	b.stop()
	getenv := env(map[string]string{"MARLOWE_DATA_DIR": b.dir})
	out, err := runBot(t, getenv, "", "replay", "--channel", "slack/"+b.slack.Config().TeamID+"/"+qaGeneral)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(out), &state); err != nil {
		t.Fatal(err)
	}
	checkSnake(t, "replay --channel", state, "")
	runs, _ := state["runs"].(map[string]any)
	if len(runs) == 0 {
		t.Fatalf("no runs in %s", out)
	}
	for id := range runs {
		out, err := runBot(t, getenv, "", "replay", "--run", id)
		if err != nil {
			t.Fatal(err)
		}
		var rs map[string]any
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			t.Fatal(err)
		}
		checkSnake(t, "replay --run", rs, "")
		if rs["id"] != id || rs["status"] == nil || rs["started_at"] == nil {
			t.Errorf("replay --run %s = %s", id, out)
		}
	}
	out, _ = runBot(t, getenv, "", "doctor", "--json")
	var checks []any
	if err := json.Unmarshal([]byte(out), &checks); err != nil || len(checks) == 0 {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	checkSnake(t, "doctor --json", checks, "")
}

// ollamaLike serves the OpenAI fake only under /v1, as Ollama does.
func ollamaLike(t *testing.T) string {
	t.Helper()
	f := llmtest.NewOpenAI()
	mux := http.NewServeMux()
	mux.Handle("/v1/", f)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { f.Release(); srv.Close() })
	return srv.URL
}

// startRedis runs a redis-server of the test's own on a free port (never
// the machine's), stopped when the test ends or when stop is called.
func startRedis(t *testing.T) (url string, stop func()) {
	t.Helper()
	rs := testredis.StartServer(t)
	return rs.URL(), rs.Stop
}

func doctorOut(t *testing.T, vars map[string]string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var out strings.Builder
	err := run(ctx, []string{"doctor"}, env(vars), strings.NewReader(""), &out, io.Discard)
	return out.String(), err
}

func wantLines(t *testing.T, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile(`(?m)` + re).MatchString(out) {
			t.Errorf("doctor output lacks /%s/:\n%s", re, out)
		}
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	redisURL, _ := startRedis(t)
	model := llmtest.NewOpenAIServer(t)
	healthySlack := slackfake.New(slackfake.Config{Scopes: slack.RequiredScopes()})
	t.Cleanup(healthySlack.Close)
	base := func(dbURL string) map[string]string {
		return map[string]string{
			"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_DATABASE_URL": dbURL, "MARLOWE_REDIS_URL": redisURL,
			"MARLOWE_SIGNING_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
			"SLACK_BOT_TOKEN":     "xoxb-t", "SLACK_APP_TOKEN": "xapp-t", "MARLOWE_SLACK_API_URL": healthySlack.APIURL(),
			"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "qwen", "MARLOWE_MODEL_BASE_URL": model.URL,
			"MARLOWE_EMBEDDING_MODEL": "nomic",
		}
	}

	t.Run("healthy", func(t *testing.T) {
		vars := base(testpg.New(t))
		if _, err := runBot(t, env(vars), "", "migrate"); err != nil {
			t.Fatal(err)
		}
		out, err := doctorOut(t, vars)
		if err != nil {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
		wantLines(t, out, `^✓ configuration`, `^✓ signing key: key \w+ from MARLOWE_SIGNING_KEY`, `^✓ store: postgres .*pgvector \d.*migrations up to date`,
			`^✓ journal: empty`, `^✓ redis: redis://127\.0\.0\.1:\d+/0 answers`, `^✓ model: openai qwen at http://127\.0\.0\.1:\d+/v1 answered.*; takes images: yes$`,
			`^✓ embeddings: openai nomic at .* a \d+-dimensional vector`, `^✓ slack bot token: connected as @marlowe-fake`,
			`^✓ slack token scopes: all 14 scopes`, `^✓ slack app token \(socket mode\)`, `^✓ slack look-alike handles`)
		if strings.Contains(out, "✗") || strings.Contains(out, "sandbox") {
			t.Errorf("unexpected lines:\n%s", out)
		}
	})

	t.Run("broken", func(t *testing.T) {
		badSlack := slackfake.New(slackfake.Config{Scopes: []string{"chat:write", "users:read", "app_mentions:read"},
			Users: []slackfake.User{{ID: "U0IMPOSTOR", Name: "marlowe-fake"}}})
		t.Cleanup(badSlack.Close)
		refused, err := llmtest.RefusedURL()
		if err != nil {
			t.Fatal(err)
		}
		vars := base(testpg.New(t))
		vars["MARLOWE_MODEL_BASE_URL"] = ollamaLike(t) // no /v1
		vars["MARLOWE_REDIS_URL"] = strings.Replace(refused, "http", "redis", 1)
		vars["MARLOWE_SLACK_API_URL"] = badSlack.APIURL()
		vars["MARLOWE_EMBEDDING_BASE_URL"] = model.URL
		out, err := doctorOut(t, vars)
		var ee exitError
		if !errors.As(err, &ee) || ee.code != 1 {
			t.Fatalf("doctor with failures: %v, want exit 1\n%s", err, out)
		}
		wantLines(t, out,
			`^! store: .*migrations pending .* fix: serve applies them at start; .bot migrate.`,
			`^✗ redis: redis://127\.0\.0\.1:\d+: .*refused.* — fix: is Redis running`,
			`^✗ model: openai qwen at http://127\.0\.0\.1:\d+: bad-request \(HTTP 404\).* — fix: .* MARLOWE_MODEL_BASE_URL probably lacks the /v1 path \(e\.g\. http://127\.0\.0\.1:\d+/v1\)`,
			`^✓ embeddings`,
			`^✗ slack token scopes: missing: channels:history.* — fix: add them`,
			`^! slack look-alike handles: .*U0IMPOSTOR`)
	})

	t.Run("unknown provider", func(t *testing.T) {
		vars := map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_MODEL_PROVIDER": "ollama"}
		out, err := doctorOut(t, vars)
		if err == nil {
			t.Fatal("doctor passed an unknown provider")
		}
		wantLines(t, out, `^✗ model: llm: MARLOWE_MODEL_PROVIDER="ollama" is not a known provider`)
	})

	t.Run("bad configuration", func(t *testing.T) {
		out, err := doctorOut(t, map[string]string{"MARLOWE_LOG_LEVEL": "loud"})
		if err == nil {
			t.Fatal("doctor passed a bad log level")
		}
		wantLines(t, out, `^✗ configuration: config: MARLOWE_LOG_LEVEL="loud"`)
	})

	t.Run("fresh embedded install changes nothing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		out, err := doctorOut(t, map[string]string{"MARLOWE_DATA_DIR": dir})
		if err != nil {
			t.Fatalf("warnings only must exit 0: %v\n%s", err, out)
		}
		wantLines(t, out, `^✓ signing key: none yet`, `^✓ store: sqlite .*no journal yet`, `^! model: none configured`,
			`^✓ redis: not configured`, `^✓ sandbox: on: no platform is configured`)
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("doctor created the data directory: %v", err)
		}
	})
}

var readyRE = regexp.MustCompile(`ready=http://(\S+)/readyz`)

// readyAddr is the bot's HTTP address, from its start-up log.
func (b *qaBot) readyAddr() string {
	b.t.Helper()
	b.waitLog("ready=http://")
	return readyRE.FindStringSubmatch(b.logs.String())[1]
}

func getReady(t *testing.T, addr string) (int, string) {
	t.Helper()
	r, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(body)
}

// TestReadyz: /readyz is 200 while the journal (Postgres), Redis and Slack
// answer, and 503 naming Redis once the test's own Redis stops (refused,
// or the check's deadline when the client's dial retries outlast it on a
// loaded machine); bot
// healthcheck follows it. /healthz stays 200: the process is alive.
func TestReadyz(t *testing.T) {
	t.Parallel()
	redisURL, stopRedis := startRedis(t)
	b := startQA(t, qaOpts{env: map[string]string{"MARLOWE_DATABASE_URL": testpg.New(t), "MARLOWE_REDIS_URL": redisURL}})
	addr := b.readyAddr()
	hc := env(map[string]string{"MARLOWE_HTTP_ADDR": addr})
	code, body := getReady(t, addr)
	if code != 200 || body != "ready\ndrain: ok\njournal: ok\nredis: ok\nslack: ok\nleases: ok\n" {
		t.Fatalf("readyz = %d %q", code, body)
	}
	if out, err := runBot(t, hc, "", "healthcheck"); err != nil || !strings.HasPrefix(out, "ready") {
		t.Fatalf("healthcheck while ready: %q, %v", out, err)
	}

	stopRedis()
	code, body = getReady(t, addr)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready\n") || !strings.Contains(body, "journal: ok") ||
		!regexp.MustCompile(`(?m)^redis: .*(refused|EOF|closed|deadline exceeded)`).MatchString(body) {
		t.Fatalf("readyz without redis = %d %q", code, body)
	}
	out, err := runBot(t, hc, "", "healthcheck")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(out, "redis: ") {
		t.Fatalf("healthcheck without redis: %q, %v", out, err)
	}
	if r, err := http.Get("http://" + addr + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("healthz (liveness) without redis: %v %v", r, err)
	} else {
		r.Body.Close()
	}
}

// TestReadyzJournalDown: the journal's database refusing connections makes
// /readyz 503 naming the journal.
func TestReadyzJournalDown(t *testing.T) {
	t.Parallel()
	dbURL := testpg.New(t)
	b := startQA(t, qaOpts{env: map[string]string{"MARLOWE_DATABASE_URL": dbURL}})
	addr := b.readyAddr()
	if code, body := getReady(t, addr); code != 200 {
		t.Fatalf("readyz = %d %q", code, body)
	}
	admin := os.Getenv(testpg.EnvURL)
	if admin == "" {
		admin = testpg.DefaultURL
	}
	c, err := pgxConnect(t, admin)
	if err != nil {
		t.Fatal(err)
	}
	name := dbName(t, dbURL)
	for _, q := range []string{
		`ALTER DATABASE "` + name + `" WITH ALLOW_CONNECTIONS false`,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + name + `' AND pid <> pg_backend_pid()`,
	} {
		if _, err := c.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Let serve's shutdown and the test database's drop proceed.
		_, _ = c.Exec(context.Background(), `ALTER DATABASE "`+name+`" WITH ALLOW_CONNECTIONS true`)
		c.Close(context.Background())
	})
	code, body := getReady(t, addr)
	if code != http.StatusServiceUnavailable || !regexp.MustCompile(`(?m)^journal: `).MatchString(body) || strings.Contains(body, "journal: ok") {
		t.Fatalf("readyz with the journal down = %d %q", code, body)
	}
}

// TestServeProbesTheModel: serve makes one minimal model call at start and
// logs what came back — a warning naming the URL and the likely cause when
// it fails — and says the sandbox is off because a platform is configured.
func TestServeProbesTheModel(t *testing.T) {
	t.Parallel()
	t.Run("answers", func(t *testing.T) {
		t.Parallel()
		b := startQA(t, qaOpts{})
		b.waitLog(`msg="model probe answered" role=model provider=openai model=fake-model url=` + b.model.URL)
		b.waitLog(`msg="sandbox off: a platform is configured" platforms=[slack]`)
	})
	t.Run("missing /v1", func(t *testing.T) {
		t.Parallel()
		base := ollamaLike(t)
		b := startQA(t, qaOpts{env: map[string]string{"MARLOWE_MODEL_BASE_URL": base}})
		b.waitLog(`msg="model probe failed`)
		line := regexp.MustCompile(`(?m)^.*model probe failed.*$`).FindString(b.logs.String())
		for _, want := range []string{"level=WARN", "url=" + base, "status=404", "lacks the /v1 path", base + "/v1"} {
			if !strings.Contains(line, want) {
				t.Errorf("probe warning lacks %q: %s", want, line)
			}
		}
	})
}

func pgxConnect(t *testing.T, dsn string) (*pgx.Conn, error) { return pgx.Connect(t.Context(), dsn) }

// dbName is the database a test URL names.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := neturl.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestServeUnknownProviderSaysSoFirst: serve reports an unknown provider
// before asking for anything else and before creating anything on disk.
func TestServeUnknownProviderSaysSoFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_MODEL_PROVIDER": "ollama", "MARLOWE_HTTP_ADDR": "127.0.0.1:0"}), "", "serve")
	if err == nil || !strings.Contains(err.Error(), `MARLOWE_MODEL_PROVIDER="ollama" is not a known provider`) || strings.Contains(err.Error(), "MARLOWE_MODEL is required") {
		t.Fatalf("serve with provider ollama: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("serve created the data directory before reporting the configuration error: %v", err)
	}
}
