package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// exporter is the engine's side of `export my data` links.
type exporter interface {
	ExportFile(ctx context.Context, q url.Values) ([]byte, error)
}

// exportHandler serves GET /export: the stored export archive an
// HMAC-signed, expiring link names (engine.ExportLink), as built when the
// person asked; no journal is read. A link whose signature does not verify
// is refused (403) before anything is read; an expired link, or one whose
// archive was deleted (`forget me`), is gone (410).
func exportHandler(ex exporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := ex.ExportFile(r.Context(), r.URL.Query())
		switch {
		case errors.Is(err, engine.ErrBadExportLink):
			http.Error(w, "this export link is not valid: ask for a new one with `export my data`", http.StatusForbidden)
			return
		case errors.Is(err, core.ErrExportGone):
			http.Error(w, "this export expired and was deleted: ask for a new one with `export my data`", http.StatusGone)
			return
		case err != nil:
			http.Error(w, "export failed; try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="marlowe-export.json"`)
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(data)
	})
}
