package postgres_test

import (
	"context"
	"testing"

	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// TestCheckReportsWithoutMigrating: Check on a fresh database sees every
// migration pending and changes nothing; after Migrate none is pending.
func TestCheckReportsWithoutMigrating(t *testing.T) {
	ctx := context.Background()
	url := testpg.New(t)
	h, err := postgres.Check(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if h.Server == "" || h.Known == 0 || h.Applied != 0 || !h.Pending() {
		t.Fatalf("fresh database: %+v", h)
	}
	again, err := postgres.Check(ctx, url)
	if err != nil || again.Applied != 0 {
		t.Fatalf("Check changed the database: %+v, %v", again, err)
	}
	if _, err := postgres.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	h, err = postgres.Check(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pending() || h.Applied != h.Known {
		t.Errorf("after Migrate: %+v", h)
	}
	if !h.VectorAvailable || h.Vector == "" {
		t.Errorf("pgvector not seen: %+v", h)
	}
	if _, err := postgres.Check(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); err == nil {
		t.Error("Check of an unreachable server succeeded")
	}
}
