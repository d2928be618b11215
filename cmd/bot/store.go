package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/store/postgres"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// stores is the durable state the bot runs on.
type stores struct {
	Journal core.Journal
	Signer  *core.Signer
	Desc    string // for the start-up log, without secrets
	KeySrc  string
	close   func()
	pg      *postgres.Store
	lite    *sqlite.Store
}

func (s *stores) Close() {
	if s.close != nil {
		s.close()
	}
}

// openStores opens Postgres when MARLOWE_DATABASE_URL is set, otherwise the
// embedded SQLite file in the data directory. Migrations run on open.
func openStores(ctx context.Context, cfg Config) (*stores, error) {
	signer, keySrc, err := loadSigner(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		pg, err := postgres.Open(ctx, cfg.DatabaseURL, signer)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		return &stores{Journal: pg, Signer: signer, Desc: "postgres " + redactURL(cfg.DatabaseURL), KeySrc: keySrc, close: pg.Close, pg: pg}, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "marlowe.db")
	lite, err := sqlite.Open(ctx, path, signer)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return &stores{Journal: lite, Signer: signer, Desc: "sqlite " + path, KeySrc: keySrc, close: func() { lite.Close() }, lite: lite}, nil
}
