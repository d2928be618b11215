package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// `export my data` builds the archive once and stores it (Config.Exports)
// under a random id the signed link names; GET /export serves the stored
// bytes, reading no journal. The archive lives as long as its link: the
// engine deletes it when the link expires (a sweep every minute, and at
// once when an expired link is used) and on `forget me`.

// exportSweepEvery is how often expired archives are deleted.
const exportSweepEvery = time.Minute

// StoreExport builds user's export, stores it and returns its link. With
// no store the link names no archive and the export is built when fetched.
func (e *Engine) StoreExport(ctx context.Context, platform, user string) (string, error) {
	exp := e.now().Add(exportLinkTTL)
	if e.cfg.Exports == nil {
		return e.ExportLink(platform, user, "", exp), nil
	}
	data, err := e.ExportData(ctx, platform, user)
	if err != nil {
		return "", err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("export id: %w", err)
	}
	id := hex.EncodeToString(b[:])
	if err := e.cfg.Exports.PutExport(ctx, core.ExportFile{ID: id, Platform: platform, User: user, Data: data, Expires: exp}); err != nil {
		return "", err
	}
	return e.ExportLink(platform, user, id, exp), nil
}

// ExportFile is the export a link's query names: the stored archive.
// ErrBadExportLink: the signature does not verify. core.ErrExportGone: the
// link expired (its archive is deleted now if the sweep has not yet) or
// the archive was deleted.
func (e *Engine) ExportFile(ctx context.Context, q url.Values) ([]byte, error) {
	platform, user, id, err := e.VerifyExportLink(q)
	if errors.Is(err, ErrExportExpired) {
		if serr := e.sweepExports(ctx); serr != nil {
			return nil, serr
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if id == "" || e.cfg.Exports == nil {
		if e.cfg.Exports != nil {
			return nil, core.ErrExportGone // a link from before exports were stored
		}
		return e.ExportData(ctx, platform, user)
	}
	f, err := e.cfg.Exports.GetExport(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.Platform != platform || f.User != user {
		return nil, core.ErrExportGone
	}
	return f.Data, nil
}

// sweepExports deletes the archives whose link expired.
func (e *Engine) sweepExports(ctx context.Context) error {
	if e.cfg.Exports == nil {
		return nil
	}
	n, err := e.cfg.Exports.DeleteExpiredExports(ctx, e.now())
	if err != nil {
		return fmt.Errorf("delete expired exports: %w", err)
	}
	if n > 0 {
		e.log.InfoContext(ctx, "deleted expired exports", "count", n)
	}
	return nil
}

// deleteExportsOf deletes person's stored archives (`forget me`).
func (e *Engine) deleteExportsOf(ctx context.Context, platform, person string) error {
	if e.cfg.Exports == nil {
		return nil
	}
	if _, err := e.cfg.Exports.DeleteExports(ctx, platform, person); err != nil {
		return fmt.Errorf("delete %s's exports: %w", person, err)
	}
	return nil
}

// startExportSweep starts the goroutine that deletes expired archives.
func (e *Engine) startExportSweep() {
	if e.cfg.Exports == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sweeping || e.closed {
		return
	}
	e.sweeping = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(exportSweepEvery)
		defer t.Stop()
		for {
			if err := e.sweepExports(e.runCtx); err != nil && e.runCtx.Err() == nil {
				e.log.Warn("export sweep failed; the next one retries", "error", err)
			}
			select {
			case <-e.runCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
