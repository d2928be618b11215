package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// A replica frozen mid-transaction (SIGSTOP between an append's two round
// trips) holds its channel's lease row FOR SHARE. Another replica's claim
// must neither block its lease loop behind it (Acquire answers "busy" at
// once) nor wait for ever: the store's sessions end a transaction left
// idle, which releases the row, and the claim then succeeds. Found by the
// Telegram replica test, whose survivor stopped renewing its own leases.
func TestFrozenWriterDoesNotStallClaims(t *testing.T) {
	t.Parallel()
	url := testpg.New(t)
	s, err := postgres.Open(t.Context(), url, journaltest.NewSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	const lease = "channel:slack/T1/C1"
	if _, ok, err := s.Acquire(ctx, lease, "frozen", 100*time.Millisecond); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	var timeout string
	if err := s.Pool().QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&timeout); err != nil || timeout != "5s" {
		t.Fatalf("idle_in_transaction_session_timeout = %q, %v; want 5s", timeout, err)
	}

	// The frozen writer: a session of the store's own kind (same settings),
	// left idle inside a transaction that holds the lease row FOR SHARE.
	frozen, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Release()
	tx, err := frozen.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT token FROM leases WHERE name = $1 FOR SHARE`, lease); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // the frozen writer's lease lapses

	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, 3*time.Second) // the old store blocked here
	defer cancel()
	_, ok, err := s.Acquire(bctx, lease, "survivor", 10*time.Second)
	if err != nil || ok {
		t.Fatalf("acquire behind a frozen writer: ok=%v err=%v, want busy", ok, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("acquire behind a frozen writer took %s", d)
	}
	// The server ends the idle transaction; the claim then goes through.
	deadline := time.Now().Add(15 * time.Second)
	for {
		f, ok, err := s.Acquire(ctx, lease, "survivor", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if f.Token < 2 {
				t.Fatalf("taken over with token %d", f.Token)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the frozen writer's transaction still holds the lease")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := tx.Commit(context.Background()); err == nil {
		t.Fatal("the frozen writer's transaction committed after the server ended it")
	}
}
