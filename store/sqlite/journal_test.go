package sqlite_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// open opens a store on path, closed on tb's cleanup.
func open(tb testing.TB, path string, signer *core.Signer) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(tb.Context(), path, signer)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

func TestJournal(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T, signer *core.Signer) journaltest.Harness {
		path := filepath.Join(t.TempDir(), "journal.db")
		s := open(t, path, signer)
		return journaltest.Harness{
			Journal: s,
			Reopen: func(t *testing.T, signer *core.Signer) core.Journal {
				return open(t, path, signer)
			},
			Tamper: tamper{s.DB()},
		}
	})
}

// tamper edits rows directly in SQL.
type tamper struct{ db *sql.DB }

func (tm tamper) exec(ctx context.Context, q string, args ...any) error {
	res, err := tm.db.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("tamper: %d rows affected (%v), want 1", n, err)
	}
	return nil
}

// flipByte inverts one byte of a BLOB column; i < 0 counts from the end.
// SQLite has no set_byte, so the edit is made in Go and written back.
func (tm tamper) flipByte(ctx context.Context, col string, ch core.ChannelKey, seq uint64, i int) error {
	var b []byte
	if err := tm.db.QueryRowContext(ctx, `SELECT `+col+` FROM commands WHERE channel = ? AND seq = ?`, string(ch), int64(seq)).Scan(&b); err != nil {
		return err
	}
	if i < 0 {
		i += len(b)
	}
	if i < 0 || i >= len(b) {
		return fmt.Errorf("tamper: byte %d of a %d-byte %s", i, len(b), col)
	}
	b[i] ^= 0xff
	return tm.exec(ctx, `UPDATE commands SET `+col+` = ? WHERE channel = ? AND seq = ?`, b, string(ch), int64(seq))
}

func (tm tamper) FlipPayloadByte(ctx context.Context, ch core.ChannelKey, seq uint64, i int) error {
	return tm.flipByte(ctx, "payload", ch, seq, i)
}

func (tm tamper) FlipSigByte(ctx context.Context, ch core.ChannelKey, seq uint64, i int) error {
	return tm.flipByte(ctx, "sig", ch, seq, i)
}

func (tm tamper) SetActorID(ctx context.Context, ch core.ChannelKey, seq uint64, id string) error {
	return tm.exec(ctx, `UPDATE commands SET actor_id = ? WHERE channel = ? AND seq = ?`, id, string(ch), int64(seq))
}

func (tm tamper) Delete(ctx context.Context, ch core.ChannelKey, seq uint64) error {
	return tm.exec(ctx, `DELETE FROM commands WHERE channel = ? AND seq = ?`, string(ch), int64(seq))
}

func (tm tamper) SwapSeq(ctx context.Context, ch core.ChannelKey, a, b uint64) error {
	tx, err := tm.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for _, step := range [][2]int64{{int64(a), math.MaxInt64}, {int64(b), int64(a)}, {math.MaxInt64, int64(b)}} {
		res, err := tx.ExecContext(ctx, `UPDATE commands SET seq = ? WHERE channel = ? AND seq = ?`, step[1], string(ch), step[0])
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("swap: seq %d not found", step[0])
		}
	}
	return tx.Commit()
}

func (tm tamper) StoredPayload(ctx context.Context, ch core.ChannelKey, seq uint64) ([]byte, error) {
	var p []byte
	err := tm.db.QueryRowContext(ctx, `SELECT payload FROM commands WHERE channel = ? AND seq = ?`, string(ch), int64(seq)).Scan(&p)
	return p, err
}

func (tm tamper) MarkRedacted(ctx context.Context, ch core.ChannelKey, seq uint64) error {
	return tm.exec(ctx, `UPDATE commands SET payload = NULL, redacted = 1 WHERE channel = ? AND seq = ?`, string(ch), int64(seq))
}

func (tm tamper) SetKeyID(ctx context.Context, ch core.ChannelKey, seq uint64, id string) error {
	return tm.exec(ctx, `UPDATE commands SET key_id = ? WHERE channel = ? AND seq = ?`, id, string(ch), int64(seq))
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	applied, err := sqlite.Migrate(t.Context(), path)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if !slices.Contains(applied, "00001_journal.sql") {
		t.Fatalf("first migrate applied %v", applied)
	}
	again, err := sqlite.Migrate(t.Context(), path)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate: applied %v, %v", again, err)
	}
	open(t, path, journaltest.NewSigner(t))
}

// TestConcurrentOpen opens a new file from several instances at once, as
// processes started together do.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.db")
	signer := journaltest.NewSigner(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8) // two results per opener
	for range 4 {
		wg.Go(func() {
			s, err := sqlite.Open(t.Context(), path, signer)
			if err != nil {
				errs <- err
				return
			}
			_, err = s.Append(t.Context(), draft(t, "open"))
			errs <- err
			errs <- s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	s := open(t, path, signer)
	if n, err := core.VerifyAll(t.Context(), s, signer.Verifier()); err != nil || n != 4 {
		t.Fatalf("verify: %d %v", n, err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	signer := journaltest.NewSigner(t)
	for _, p := range []string{"", "a.db?mode=ro", "file:a.db", filepath.Join(t.TempDir(), "missing-dir", "a.db")} {
		if _, err := sqlite.Open(t.Context(), p, signer); err == nil {
			t.Fatalf("open %q: no error", p)
		}
	}
}

func draft(tb testing.TB, ch string) core.Draft {
	tb.Helper()
	d, err := core.NewBoundary(nil).Human(core.Person{ID: "U1"}, core.Scope{Platform: "test", Workspace: "w", Channel: ch},
		core.Meta{}, &core.MessageReceived{MessageID: "m", Author: core.Person{ID: "U1"}, Visibility: core.Public, Text: "hi"})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// Environment of a child process started by TestProcesses.
const (
	childPath = "MARLOWE_SQLITE_CHILD_PATH"
	childSeed = "MARLOWE_SQLITE_CHILD_SEED"
)

const childAppends = 40

// TestProcesses appends to one file from three processes (this test binary
// re-run as TestChildAppender) and this one at once: SQLite's file lock, not
// anything in-process, must keep the chains whole.
func TestProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.db")
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	signer, err := core.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, path, signer)

	var wg sync.WaitGroup
	outs := make([][]byte, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestChildAppender$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childPath+"="+path, childSeed+"="+hex.EncodeToString(seed))
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	appendMix(t, s, "parent")
	wg.Wait()
	for i := range 3 {
		if errs[i] != nil {
			t.Fatalf("child %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	n, err := core.VerifyAll(t.Context(), s, signer.Verifier())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	// Four appenders, each childAppends rounds of 1 or 2 commands.
	if want := 4 * childAppends * 3 / 2; n != want {
		t.Fatalf("verified %d commands, want %d", n, want)
	}
}

// TestChildAppender is TestProcesses' child; it does nothing when run
// normally.
func TestChildAppender(t *testing.T) {
	path := os.Getenv(childPath)
	if path == "" {
		t.Skip("child process of TestProcesses")
	}
	seed, err := hex.DecodeString(os.Getenv(childSeed))
	if err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("bad %s", childSeed)
	}
	signer, err := core.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	appendMix(t, open(t, path, signer), fmt.Sprintf("child %d", os.Getpid()))
}

// appendMix appends childAppends rounds alternating between two channels,
// odd rounds as a batch of two.
func appendMix(t *testing.T, j core.Journal, who string) {
	t.Helper()
	for r := range childAppends {
		ch := []string{"mp-a", "mp-b"}[r%2]
		drafts := []core.Draft{draft(t, ch)}
		if r%2 == 1 {
			drafts = append(drafts, draft(t, ch))
		}
		if _, err := j.Append(t.Context(), drafts...); err != nil {
			t.Fatalf("%s round %d: %v", who, r, err)
		}
	}
}
