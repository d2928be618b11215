package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// env builds a getenv over a fixed map.
func env(kv map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := kv[k]; ok {
			return v
		}
		if k == "MARLOWE_DRAIN_TIMEOUT" {
			// Serves stopped by a test drain briefly: a test's stop limit
			// (15 s) is shorter than the 20 s default.
			return "3s"
		}
		return ""
	}
}

func runBot(t *testing.T, getenv func(string) string, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, getenv, strings.NewReader(stdin), &out, &errOut)
	return out.String(), err
}

// seedJournal appends n commands to one channel of the SQLite store in dir.
func seedJournal(t *testing.T, dir string, n int) core.ChannelKey {
	t.Helper()
	cfg, err := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStores(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := core.NewBoundary(nil)
	scope := core.Scope{Platform: "sandbox", Workspace: "local", Channel: "general"}
	for i := range n {
		d, err := b.Human(core.Person{ID: "alice"}, scope, core.Meta{}, &core.MessageReceived{MessageID: string(rune('a' + i)), Author: core.Person{ID: "alice"}, Text: "hello", Reason: "mention"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Journal.Append(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	return scope.Key()
}

func TestHelpListsSubcommands(t *testing.T) {
	out, err := runBot(t, env(nil), "", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"serve", "migrate", "verify", "keys generate", "replay", "intent replay", "version"} {
		if !strings.Contains(out, sub) {
			t.Errorf("--help does not list %q", sub)
		}
	}
	if _, err := runBot(t, env(nil), "", "frobnicate"); err == nil {
		t.Fatal("unknown command accepted")
	}
}

func TestVerifyNamesFirstRowTamperedInSQL(t *testing.T) {
	cases := []struct {
		name    string
		sql     string
		wantSeq uint64
	}{
		{"payload edited", `UPDATE commands SET payload = CAST(replace(CAST(payload AS TEXT), 'hello', 'HELLO') AS BLOB) WHERE seq = 3`, 3},
		{"signature edited", `UPDATE commands SET sig = zeroblob(64) WHERE seq = 2`, 2},
		{"row deleted", `DELETE FROM commands WHERE seq = 4`, 4},
		{"last row deleted", `DELETE FROM commands WHERE seq = 5`, 5},
		{"silent redaction", `UPDATE commands SET payload = NULL, redacted = 1 WHERE seq = 3`, 3},
		{"key id cleared", `UPDATE commands SET key_id = '' WHERE seq = 2`, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ch := seedJournal(t, dir, 5)
			getenv := env(map[string]string{"MARLOWE_DATA_DIR": dir})
			if out, err := runBot(t, getenv, "", "verify"); err != nil || !strings.Contains(out, "ok: 5 commands") {
				t.Fatalf("clean journal: %q, %v", out, err)
			}
			db, err := sql.Open("sqlite", filepath.Join(dir, "marlowe.db"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tc.sql); err != nil {
				t.Fatal(err)
			}
			db.Close()
			out, err := runBot(t, getenv, "", "verify")
			var ee exitError
			if !errors.As(err, &ee) || ee.code != 1 {
				t.Fatalf("verify after tampering: err %v, want exit 1", err)
			}
			want := "FAIL channel " + string(ch) + " seq " + itoa(tc.wantSeq)
			if !strings.HasPrefix(out, want) {
				t.Fatalf("output %q, want prefix %q", out, want)
			}
		})
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestReplayPrintsFoldedState(t *testing.T) {
	dir := t.TempDir()
	ch := seedJournal(t, dir, 3)
	getenv := env(map[string]string{"MARLOWE_DATA_DIR": dir})
	out, err := runBot(t, getenv, "", "replay", "--channel", string(ch))
	if err != nil {
		t.Fatal(err)
	}
	var st fold.ChannelState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("replay output is not the state JSON: %v\n%s", err, out)
	}
	if st.Seq != 3 || st.Counts["message.received"] != 3 || st.Channel != ch {
		t.Fatalf("state = %+v", st)
	}
	if _, err := runBot(t, getenv, "", "replay"); err == nil {
		t.Fatal("replay without --channel accepted")
	}
	if _, err := runBot(t, getenv, "", "replay", "--channel", "nope"); err == nil {
		t.Fatal("bad channel key accepted")
	}
}

// bot replay reports the facts the engine acts on: consents by id (two
// grants of one tool and destination, one revoked), the first resolution of
// a card (a late expiry after an approval changes nothing), and a run that
// still waits while another of its cards is pending.
func TestReplayReportsTheEnginesConsentsAndApprovals(t *testing.T) {
	dir := t.TempDir()
	cfg, err := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStores(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := core.NewBoundary(nil)
	scope := core.Scope{Platform: "sandbox", Workspace: "local", Channel: "general"}
	for _, c := range []struct {
		run string
		p   core.Payload
	}{
		{"", &core.ConsentGranted{ConsentID: "K1", Tool: "post", Destination: "#a", Owner: "alice"}},
		{"", &core.ConsentGranted{ConsentID: "K2", Tool: "post", Destination: "#a", Owner: "alice"}},
		{"", &core.ConsentRevoked{ConsentID: "K1", Tool: "post", Destination: "#a", Owner: "alice"}},
		{"R1", &core.RunStarted{Trigger: "m1"}},
		{"R1", &core.ApprovalRequested{ApprovalID: "A1", Tool: "post"}},
		{"R1", &core.ApprovalRequested{ApprovalID: "A2", Tool: "post"}},
		{"R1", &core.ApprovalResolved{ApprovalID: "A1", Decision: "approved", By: core.Person{ID: "bob"}}},
		{"R1", &core.ApprovalResolved{ApprovalID: "A1", Decision: "expired"}},
	} {
		d, err := b.System("test", scope, core.Meta{Run: c.run}, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Journal.Append(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "replay", "--channel", string(scope.Key()))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Consents []struct {
			ID, Tool, Destination, Owner string
		} `json:"consents"`
		Approvals map[string]struct{ Decision, By string } `json:"approvals"`
		Runs      map[string]struct{ Status string }       `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("replay output: %v\n%s", err, out)
	}
	if len(got.Consents) != 1 || got.Consents[0].ID != "K2" || got.Consents[0].Tool != "post" || got.Consents[0].Destination != "#a" || got.Consents[0].Owner != "alice" {
		t.Errorf("consents = %+v, want K2 only\n%s", got.Consents, out)
	}
	if a := got.Approvals["A1"]; a.Decision != "approved" || a.By != "bob" {
		t.Errorf("A1 = %+v, want approved by bob", a)
	}
	if r := got.Runs["R1"]; r.Status != string(core.RunWaitingApproval) {
		t.Errorf("R1 = %+v, want waiting for A2", r)
	}
}

func TestSigningKeyIsGeneratedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": dir}))
	s1, src1, err := loadSigner(cfg)
	if err != nil || !strings.Contains(src1, "generated") {
		t.Fatalf("first load: %v %q", err, src1)
	}
	s2, src2, err := loadSigner(cfg)
	if err != nil || strings.Contains(src2, "generated") {
		t.Fatalf("second load: %v %q", err, src2)
	}
	if !bytes.Equal(s1.DeriveKey("x"), s2.DeriveKey("x")) {
		t.Fatal("the reloaded key differs from the generated one")
	}
	info, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", info.Mode(), err)
	}
	bad, _ := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_SIGNING_KEY": "not-a-key!"}))
	if _, _, err := loadSigner(bad); err == nil || !strings.Contains(err.Error(), "MARLOWE_SIGNING_KEY") {
		t.Fatalf("bad key: %v", err)
	}
}

func TestConfigFileUnderEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "marlowe.env")
	if err := os.WriteFile(path, []byte("# comment\nMARLOWE_DATA_DIR=/from/file\nexport MARLOWE_HTTP_ADDR=\"127.0.0.1:9999\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(env(map[string]string{"MARLOWE_CONFIG": path, "MARLOWE_DATA_DIR": "/from/env"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/env" || cfg.HTTPAddr != "127.0.0.1:9999" {
		t.Fatalf("cfg = %+v", cfg)
	}
	if err := os.WriteFile(path, []byte("garbage line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(env(map[string]string{"MARLOWE_CONFIG": path})); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("malformed file: %v", err)
	}
	if _, err := loadConfig(env(map[string]string{"MARLOWE_LOG_LEVEL": "loud"})); err == nil {
		t.Fatal("bad log level accepted")
	}
}

func TestIntentReplaySharedScenario(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "scenarios", "intent-basic.jsonl")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("shared scenarios not present: %v", err)
	}
	out, err := runBot(t, env(nil), "", "intent", "replay", path)
	if err != nil {
		t.Fatal(err)
	}
	stdinOut, err := runBot(t, env(nil), string(raw), "intent", "replay", "-")
	if err != nil || stdinOut != out {
		t.Fatalf("stdin replay differs: %v", err)
	}
	var want []string
	for line := range strings.Lines(string(raw)) {
		var l struct{ Type, ID, Expect string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == "message" {
			want = append(want, l.ID+"="+l.Expect)
		}
	}
	var got []string
	for line := range strings.Lines(out) {
		var d struct{ ID, Decision string }
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("bad output line %q: %v", line, err)
		}
		got = append(got, d.ID+"="+d.Decision)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("decisions\n got %v\nwant %v", got, want)
	}
	_, err = runBot(t, env(nil), "{\"t\":0,\"type\":\"message\"\n", "intent", "replay", "-")
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("malformed input: %v", err)
	}
}

// A Slack setting without the bot token stops serve with an error naming the
// variable, instead of quietly starting the sandbox alone.
func TestServeSlackSettingWithoutTokenFails(t *testing.T) {
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":     t.TempDir(),
		"MARLOWE_HTTP_ADDR":    "127.0.0.1:0",
		"MARLOWE_SANDBOX_ADDR": "127.0.0.1:0",
		"MARLOWE_SLACK_MODE":   "http",
		"SLACK_SIGNING_SECRET": "secret",
	})
	_, err := runBot(t, getenv, "", "serve")
	if err == nil || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") {
		t.Fatalf("serve = %v, want an error naming SLACK_BOT_TOKEN", err)
	}
}

// TestSigningKeyGenerationRace: processes starting together on a new data
// directory all end up with the one key that landed.
func TestSigningKeyGenerationRace(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": dir}))
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			s, _, err := loadSigner(cfg)
			if err == nil {
				keys[i] = s.DeriveKey("x")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("loader %d: err %v, same key %v", i, errs[i], bytes.Equal(keys[i], keys[0]))
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, keyFile+".tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary key files left behind: %v", left)
	}
}

// `bot channels` lists the keys replay takes, with counts and last
// activity; `bot verify` on a data directory without a journal says so
// (exit 1) instead of asking for verify keys.
func TestChannelsAndVerifyWithoutJournal(t *testing.T) {
	dir := t.TempDir()
	ch := seedJournal(t, dir, 5)
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "channels")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(regexp.QuoteMeta(string(ch)) + `\s+5\s+\d{4}-\d\d-\d\dT`).MatchString(out) {
		t.Errorf("channels output %q: want %s with 5 commands and a time", out, ch)
	}
	empty := t.TempDir()
	_, err = runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": empty}), "", "verify")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "no journal") || strings.Contains(err.Error(), "verification key") {
		t.Errorf("verify on an empty data dir: %v, want exit 1 saying there is no journal", err)
	}
}
