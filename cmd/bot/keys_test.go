package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// appendWith appends n messages to the sandbox general channel through the
// stores serve would open with vars (generating the key file if there is
// none, as serve does), bypassing serve's start-up checks.
func appendWith(t *testing.T, vars map[string]string, n int) core.ChannelKey {
	t.Helper()
	cfg, err := loadConfig(env(vars))
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
	for range n {
		d, err := b.Human(core.Person{ID: "alice"}, scope, core.Meta{}, &core.MessageReceived{MessageID: b.NewID(), Author: core.Person{ID: "alice"}, Text: "hello", Reason: "mention"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Journal.Append(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	return scope.Key()
}

func with(vars map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range vars {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// generateKey runs `bot keys generate` and returns the private key it
// printed and the key's id and public key.
func generateKey(t *testing.T) (priv, id, pub string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"keys", "generate"}, env(nil), strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("keys generate: %v", err)
	}
	priv = strings.TrimSpace(out.String())
	key, err := parseKey(priv)
	if err != nil {
		t.Fatalf("keys generate printed %q, not a key MARLOWE_SIGNING_KEY accepts: %v", priv, err)
	}
	p := key.Public().(ed25519.PublicKey)
	id, pub = core.KeyID(p), base64.StdEncoding.EncodeToString(p)
	if !strings.Contains(errOut.String(), id) || !strings.Contains(errOut.String(), pub) {
		t.Fatalf("keys generate stderr %q does not name the new key's id and public key", errOut.String())
	}
	return priv, id, pub
}

// keyOf runs `bot keys` under vars and returns the current key id and
// public key it prints.
func keyOf(t *testing.T, vars map[string]string) (id, pub string) {
	t.Helper()
	out, err := runBot(t, env(vars), "", "keys")
	if err != nil {
		t.Fatalf("keys: %v", err)
	}
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "key id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "public key: "); ok {
			pub = v
		}
	}
	if id == "" || pub == "" {
		t.Fatalf("keys printed %q", out)
	}
	return id, pub
}

func wantExit(t *testing.T, err error, code int) {
	t.Helper()
	var ee exitError
	if !errors.As(err, &ee) || ee.code != code {
		t.Fatalf("err %v, want exit %d", err, code)
	}
}

// logWatch is a log writer that reports when a line containing want has
// been written.
type logWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  string
	seen  chan struct{}
	fired bool
}

func newLogWatch(want string) *logWatch { return &logWatch{want: want, seen: make(chan struct{})} }

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.fired && strings.Contains(w.buf.String(), w.want) {
		w.fired = true
		close(w.seen)
	}
	return n, err
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// serveUntilReady starts serve and returns nil once the sandbox is ready
// (then stops it), or serve's error if it stops first.
func serveUntilReady(t *testing.T, vars map[string]string) error {
	t.Helper()
	vars = with(vars, "MARLOWE_HTTP_ADDR", "127.0.0.1:0", "MARLOWE_SANDBOX_ADDR", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := newLogWatch("sandbox ready")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, logs) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("serve stopped without error before it was ready:\n%s", logs)
		}
		return err
	case <-logs.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve neither started nor failed:\n%s", logs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve stopped with %v", err)
	}
	return nil
}

// TestKeyRotation changes the signing key of an existing journal (the data
// directory's generated key, then MARLOWE_SIGNING_KEY, as the README advised
// for production), on both stores.
func TestKeyRotation(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { keyRotation(t, "") })
	t.Run("postgres", func(t *testing.T) { keyRotation(t, testpg.New(t)) })
}

func keyRotation(t *testing.T, dbURL string) {
	dir := t.TempDir()
	base := map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_DATABASE_URL": dbURL}
	ch := appendWith(t, base, 3) // signed by the generated key
	oldID, oldPub := keyOf(t, base)
	newKey, newID, newPub := generateKey(t)
	rotated := with(base, "MARLOWE_SIGNING_KEY", newKey)

	// Without MARLOWE_VERIFY_KEYS: serve refuses, naming the old key, the
	// variable, and (the old key being the data directory's) its public key.
	err := serveUntilReady(t, rotated)
	t.Logf("serve refused: %v", err)
	for _, want := range []string{oldID, "MARLOWE_VERIFY_KEYS", oldPub, string(ch)} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("serve after a key change: %v, want an error naming %q", err, want)
		}
	}
	// ... and verify fails at seq 1, naming the old key.
	out, err := runBot(t, env(rotated), "", "verify")
	t.Logf("verify: %s", out)
	wantExit(t, err, 1)
	if !strings.HasPrefix(out, "FAIL channel "+string(ch)+" seq 1") || !strings.Contains(out, oldID) || !strings.Contains(out, "MARLOWE_VERIFY_KEYS") {
		t.Fatalf("verify after a key change: %q", out)
	}

	// With the old public key listed: serve starts, the new key signs from
	// then on, and verify passes across both halves.
	listed := with(rotated, "MARLOWE_VERIFY_KEYS", oldPub)
	if err := serveUntilReady(t, listed); err != nil {
		t.Fatalf("serve with the old key in MARLOWE_VERIFY_KEYS: %v", err)
	}
	appendWith(t, listed, 2)
	out, err = runBot(t, env(listed), "", "verify")
	if err != nil || !strings.HasPrefix(out, "ok: 5 commands") || !strings.Contains(out, oldID) || !strings.Contains(out, newID) {
		t.Fatalf("verify across the rotation: %q %v", out, err)
	}
	// The new half really is signed by the new key: the old key alone fails
	// at seq 4, naming the new one.
	out, err = runBot(t, env(with(base, "MARLOWE_SIGNING_KEY", "", "MARLOWE_VERIFY_KEYS", oldPub)), "", "verify")
	wantExit(t, err, 1)
	if !strings.HasPrefix(out, "FAIL channel "+string(ch)+" seq 4") || !strings.Contains(out, newID) {
		t.Fatalf("verify with the old key only: %q", out)
	}
	// Public keys alone verify, and serve started again without the old key
	// refuses no longer: the newest commands are the new key's.
	out, err = runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_DATABASE_URL": dbURL, "MARLOWE_VERIFY_KEYS": newPub + ", " + oldPub}), "", "verify")
	if err != nil || !strings.HasPrefix(out, "ok: 5 commands") {
		t.Fatalf("verify with public keys only: %q %v", out, err)
	}
	if err := serveUntilReady(t, rotated); err != nil {
		t.Fatalf("serve with the new key once the newest commands are its own: %v", err)
	}
}

// TestVerifyFromEmptyDataDir: verify against an existing Postgres journal
// from a machine with nothing but the database URL creates no key and
// exits 2 saying what to set; with the public key it verifies.
func TestVerifyFromEmptyDataDir(t *testing.T) {
	dbURL := testpg.New(t)
	home := t.TempDir() // the service's data directory, where its key is
	appendWith(t, map[string]string{"MARLOWE_DATA_DIR": home, "MARLOWE_DATABASE_URL": dbURL}, 4)
	pubOut, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": home}), "", "keys", "--public")
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(pubOut)
	empty := t.TempDir()
	vars := map[string]string{"MARLOWE_DATA_DIR": empty, "MARLOWE_DATABASE_URL": dbURL}
	out, err := runBot(t, env(vars), "", "verify")
	wantExit(t, err, 2)
	if !strings.Contains(err.Error(), "MARLOWE_VERIFY_KEYS") || !strings.Contains(err.Error(), "MARLOWE_SIGNING_KEY") {
		t.Fatalf("verify without a key: %v (stdout %q), want it to name MARLOWE_VERIFY_KEYS and MARLOWE_SIGNING_KEY", err, out)
	}
	noFiles(t, empty)
	// `bot keys` does not create one either.
	_, err = runBot(t, env(vars), "", "keys")
	wantExit(t, err, 2)
	noFiles(t, empty)

	out, err = runBot(t, env(with(vars, "MARLOWE_VERIFY_KEYS", pub)), "", "verify")
	if err != nil || !strings.HasPrefix(out, "ok: 4 commands") {
		t.Fatalf("verify with the public key: %q %v", out, err)
	}
	noFiles(t, empty)
	// A wrong public key fails naming the journal's key id, still creating
	// nothing.
	_, _, otherPub := generateKey(t)
	out, err = runBot(t, env(with(vars, "MARLOWE_VERIFY_KEYS", otherPub)), "", "verify")
	wantExit(t, err, 1)
	if !strings.Contains(out, "seq 1") || !strings.Contains(out, "not a trusted key") {
		t.Fatalf("verify with another public key: %q", out)
	}
	noFiles(t, empty)
}

func noFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("%s now holds %v, want nothing created", dir, names)
	}
}

// TestVerifyEmbeddedWithoutJournal: from an empty data directory with no
// database URL, verify creates neither a key nor a database.
func TestVerifyEmbeddedWithoutJournal(t *testing.T) {
	dir := t.TempDir()
	_, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "verify")
	wantExit(t, err, 1) // nothing to verify: a failure, not a usage error
	_, _, pub := generateKey(t)
	_, err = runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_VERIFY_KEYS": pub}), "", "verify")
	wantExit(t, err, 1)
	if !strings.Contains(err.Error(), "no journal") {
		t.Fatalf("verify with a key but no journal: %v", err)
	}
	noFiles(t, dir)
	if _, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "replay", "--channel", "sandbox/local/general"); err == nil {
		t.Fatal("replay without a journal: no error")
	}
	noFiles(t, dir)
}

// TestSilentRedactionOnPostgres: the binary's verify names a row whose
// payload was removed in SQL without a command.redacted.
func TestSilentRedactionOnPostgres(t *testing.T) {
	dbURL := testpg.New(t)
	vars := map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_DATABASE_URL": dbURL}
	ch := appendWith(t, vars, 5)
	if out, err := runBot(t, env(vars), "", "verify"); err != nil || !strings.HasPrefix(out, "ok: 5 commands") {
		t.Fatalf("clean journal: %q %v", out, err)
	}
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `UPDATE commands SET payload = NULL, redacted = true WHERE seq = 2`); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	out, err := runBot(t, env(vars), "", "verify")
	wantExit(t, err, 1)
	if !strings.HasPrefix(out, "FAIL channel "+string(ch)+" seq 2") || !strings.Contains(out, "command.redacted") {
		t.Fatalf("verify after a silent redaction: %q", out)
	}
}

func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	priv, id, pub := generateKey(t)
	vars := map[string]string{"MARLOWE_DATA_DIR": dir, "MARLOWE_SIGNING_KEY": priv}
	gotID, gotPub := keyOf(t, vars)
	if gotID != id || gotPub != pub {
		t.Fatalf("keys: %s %s, want %s %s", gotID, gotPub, id, pub)
	}
	if out, err := runBot(t, env(vars), "", "keys", "--public"); err != nil || strings.TrimSpace(out) != pub {
		t.Fatalf("keys --public: %q %v", out, err)
	}
	_, oldID, oldPub := generateKey(t)
	out, err := runBot(t, env(with(vars, "MARLOWE_VERIFY_KEYS", oldPub)), "", "keys")
	if err != nil || !strings.Contains(out, oldID+" "+oldPub) {
		t.Fatalf("keys with a verify key: %q %v", out, err)
	}
	noFiles(t, dir)
	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString(make([]byte, 64)), base64.StdEncoding.EncodeToString(make([]byte, 16))} {
		_, err := runBot(t, env(with(vars, "MARLOWE_VERIFY_KEYS", pub+","+bad)), "", "verify")
		if err == nil || !strings.Contains(err.Error(), "MARLOWE_VERIFY_KEYS") || !strings.Contains(err.Error(), "entry 2") {
			t.Fatalf("MARLOWE_VERIFY_KEYS with %q: %v", bad, err)
		}
	}
	if _, err := runBot(t, env(vars), "", "keys", "frobnicate"); err == nil {
		t.Fatal("keys frobnicate accepted")
	}
}
