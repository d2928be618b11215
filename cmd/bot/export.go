package main

import (
	"context"
	"net/http"
	"net/url"
)

// exporter is the engine's side of `export my data` links.
type exporter interface {
	VerifyExportLink(q url.Values) (platform, user string, err error)
	ExportData(ctx context.Context, platform, user string) ([]byte, error)
}

// exportHandler serves GET /export: the JSON export of the person an
// HMAC-signed, expiring link names (engine.ExportLink). A link whose
// signature does not verify, or that expired, is refused (403) before
// anything is read.
func exportHandler(ex exporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		platform, user, err := ex.VerifyExportLink(r.URL.Query())
		if err != nil {
			http.Error(w, "this export link is not valid (bad signature, or expired): ask for a new one with `export my data`", http.StatusForbidden)
			return
		}
		data, err := ex.ExportData(r.Context(), platform, user)
		if err != nil {
			http.Error(w, "export failed; try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="marlowe-export.json"`)
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(data)
	})
}
