package postgres_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// open opens a store on url, closed on tb's cleanup.
func open(tb testing.TB, url string, signer *core.Signer) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(tb.Context(), url, signer)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

func TestJournal(t *testing.T) {
	t.Parallel()
	journaltest.Run(t, func(t *testing.T, signer *core.Signer) journaltest.Harness {
		// A smaller pool than production's: test packages share one server.
		url := testpg.Pooled(testpg.New(t), 8)
		s := open(t, url, signer)
		return journaltest.Harness{
			Journal: s,
			Reopen: func(t *testing.T, signer *core.Signer) core.Journal {
				return open(t, url, signer)
			},
			Tamper: tamper{s.Pool()},
		}
	})
}

// tamper edits rows directly in SQL.
type tamper struct{ pool *pgxpool.Pool }

func (tm tamper) exec(ctx context.Context, sql string, args ...any) error {
	tag, err := tm.pool.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("tamper: %d rows affected, want 1", tag.RowsAffected())
	}
	return nil
}

// flipByte inverts one byte of a bytea column; i < 0 counts from the end.
func (tm tamper) flipByte(ctx context.Context, col string, ch core.ChannelKey, seq uint64, i int) error {
	idx := fmt.Sprintf(`(CASE WHEN $3 < 0 THEN length(%[1]s) + $3 ELSE $3 END)`, col)
	return tm.exec(ctx, fmt.Sprintf(`UPDATE commands SET %[1]s = set_byte(%[1]s, %[2]s, get_byte(%[1]s, %[2]s) # 255)
		WHERE channel = $1 AND seq = $2`, col, idx), string(ch), int64(seq), i)
}

func (tm tamper) FlipPayloadByte(ctx context.Context, ch core.ChannelKey, seq uint64, i int) error {
	return tm.flipByte(ctx, "payload", ch, seq, i)
}

func (tm tamper) FlipSigByte(ctx context.Context, ch core.ChannelKey, seq uint64, i int) error {
	return tm.flipByte(ctx, "sig", ch, seq, i)
}

func (tm tamper) SetActorID(ctx context.Context, ch core.ChannelKey, seq uint64, id string) error {
	return tm.exec(ctx, `UPDATE commands SET actor_id = $3 WHERE channel = $1 AND seq = $2`, string(ch), int64(seq), id)
}

func (tm tamper) Delete(ctx context.Context, ch core.ChannelKey, seq uint64) error {
	return tm.exec(ctx, `DELETE FROM commands WHERE channel = $1 AND seq = $2`, string(ch), int64(seq))
}

func (tm tamper) SwapSeq(ctx context.Context, ch core.ChannelKey, a, b uint64) error {
	return pgx.BeginFunc(ctx, tm.pool, func(tx pgx.Tx) error {
		for _, step := range [][2]int64{{int64(a), math.MaxInt64}, {int64(b), int64(a)}, {math.MaxInt64, int64(b)}} {
			tag, err := tx.Exec(ctx, `UPDATE commands SET seq = $3 WHERE channel = $1 AND seq = $2`, string(ch), step[0], step[1])
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("swap: seq %d not found", step[0])
			}
		}
		return nil
	})
}

func (tm tamper) StoredPayload(ctx context.Context, ch core.ChannelKey, seq uint64) ([]byte, error) {
	var p []byte
	err := tm.pool.QueryRow(ctx, `SELECT payload FROM commands WHERE channel = $1 AND seq = $2`, string(ch), int64(seq)).Scan(&p)
	return p, err
}

func (tm tamper) MarkRedacted(ctx context.Context, ch core.ChannelKey, seq uint64) error {
	return tm.exec(ctx, `UPDATE commands SET payload = NULL, redacted = true WHERE channel = $1 AND seq = $2`, string(ch), int64(seq))
}

func (tm tamper) SetKeyID(ctx context.Context, ch core.ChannelKey, seq uint64, id string) error {
	return tm.exec(ctx, `UPDATE commands SET key_id = $3 WHERE channel = $1 AND seq = $2`, string(ch), int64(seq), id)
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	url := testpg.New(t)
	applied, err := postgres.Migrate(t.Context(), url)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if !slices.Contains(applied, "00001_journal.sql") {
		t.Fatalf("first migrate applied %v", applied)
	}
	again, err := postgres.Migrate(t.Context(), url)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate: applied %v, %v", again, err)
	}
	open(t, url, journaltest.NewSigner(t)) // opening a migrated database applies nothing and works
}

// TestConcurrentOpen starts several instances on a new database at once, as
// replicas do: the advisory lock lets exactly one apply each migration.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	url := testpg.New(t)
	signer := journaltest.NewSigner(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), url, signer)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent open: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	if _, err := postgres.Open(t.Context(), "postgres://127.0.0.1:1/none?connect_timeout=1", journaltest.NewSigner(t)); err == nil {
		t.Fatal("open an unreachable server: no error")
	}
}
