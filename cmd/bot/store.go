package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/marlowe-bot/marlowe/attachments"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/store/postgres"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// stores is the durable state the bot runs on.
type stores struct {
	Journal core.Journal
	Memory  memory.Index // the memory index on the same database
	Signer  *core.Signer
	// Leases is the replicas' lease table (Postgres only: the embedded
	// store is one process, which owns every channel).
	Leases core.Leases
	// Elect is the lease table single-holder jobs (the routine firer, the
	// Telegram poller) are elected through; the embedded store has one too.
	Elect core.Leases
	// Deliveries is the durable retry queue of inbound deliveries (both
	// stores have one, next to the journal).
	Deliveries core.DeliveryQueue
	// Credentials keeps per-person sealed sign-ins (both stores).
	Credentials core.CredentialStore
	// Listen delivers other processes' appends (Postgres NOTIFY); nil for
	// the embedded store.
	Listen func(ctx context.Context, fn func(core.ChannelKey, uint64), onErr func(error))
	// Blobs keeps the images a model was shown (attachments): the blobs
	// table on Postgres, files under the data directory's blobs/ otherwise.
	Blobs core.BlobStore
	// Exports keeps `export my data` archives until their link expires.
	Exports core.ExportStore
	Desc    string // for the start-up log, without secrets
	KeySrc  string
	close   func()
}

func (s *stores) Close() {
	if s.close != nil {
		s.close()
	}
}

// openStores opens Postgres when MARLOWE_DATABASE_URL is set, otherwise the
// embedded SQLite file in the data directory. Migrations run on open.
func openStores(ctx context.Context, cfg config) (*stores, error) {
	signer, keySrc, err := loadSigner(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		if err := strictURL("MARLOWE_DATABASE_URL", cfg.DatabaseURL); err != nil {
			return nil, err
		}
		pg, err := postgres.Open(ctx, cfg.DatabaseURL, signer)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		// The memory index has its own pool: its transactions run under the
		// row-level-security role, bound to one channel each.
		mix, err := postgres.OpenMemoryIndex(ctx, cfg.DatabaseURL, postgres.MemoryOptions{})
		if err != nil {
			pg.Close()
			return nil, fmt.Errorf("open postgres memory index: %w", err)
		}
		return &stores{Journal: pg, Memory: mix, Signer: signer, Leases: pg, Elect: pg, Deliveries: pg, Credentials: pg, Blobs: pg, Exports: pg, Listen: pg.Listen, Desc: "postgres " + redactDSN(cfg.DatabaseURL), KeySrc: keySrc,
			close: func() { mix.Close(); pg.Close() }}, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "marlowe.db")
	lite, err := sqlite.Open(ctx, path, signer)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return &stores{Journal: lite, Memory: sqlite.NewMemoryIndex(lite), Signer: signer, Elect: lite, Deliveries: lite, Credentials: lite, Blobs: attachments.DirBlobs{Dir: filepath.Join(cfg.DataDir, "blobs")}, Exports: lite, Desc: "sqlite " + path, KeySrc: keySrc,
		close: func() { lite.Close() }}, nil
}

// newMemory builds per-channel memory over the store's index; without an
// embedder recall is lexical only and says so.
func newMemory(st *stores, b *core.Boundary, emb core.Embedder, pol core.Policy, log *slog.Logger) (*memory.Service, error) {
	mem, err := memory.New(memory.Config{Journal: st.Journal, Boundary: b, Index: st.Memory, Embedder: emb, DefaultPolicy: pol, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	return mem, nil
}

// openJournalReadOnly opens the journal without a signing key, for commands
// that only read (verify, replay): it never creates a key, and never
// creates an embedded database either.
func openJournalReadOnly(ctx context.Context, cfg config) (core.Journal, func(), error) {
	if cfg.DatabaseURL != "" {
		if err := strictURL("MARLOWE_DATABASE_URL", cfg.DatabaseURL); err != nil {
			return nil, nil, err
		}
		pg, err := postgres.Open(ctx, cfg.DatabaseURL, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("open postgres: %w", err)
		}
		return pg, pg.Close, nil
	}
	path := filepath.Join(cfg.DataDir, "marlowe.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, exitError{code: 2, err: fmt.Errorf("no journal at %s: set MARLOWE_DATA_DIR to the data directory, or MARLOWE_DATABASE_URL", path)}
	} else if err != nil {
		return nil, nil, fmt.Errorf("open sqlite: %w", err)
	}
	lite, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return lite, func() { lite.Close() }, nil
}
