package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// GET /export serves the export a signed link names, and refuses (403,
// nothing read) a link whose signature was tampered with, one re-pointed
// at another person, one whose expiry was moved, one unsigned, and an
// expired one.
func TestExportLink(t *testing.T) {
	e, _ := testengine.Start(t, coretest.NewFakeSurface("test", "UBOT"), nil, nil)
	srv := httptest.NewServer(exportHandler(e))
	defer srv.Close()
	get := func(link string) (int, string) {
		t.Helper()
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(srv.URL + "/export?" + u.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	good := e.ExportLink("test", "UALICE", time.Now().Add(time.Minute))
	code, body := get(good)
	var ex engine.Export
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ex) != nil || ex.User != "UALICE" || ex.Platform != "test" {
		t.Fatalf("good link: %d %s", code, body)
	}
	u, _ := url.Parse(good)
	q := u.Query()
	tampered := url.Values{"p": {"test"}, "u": {"UALICE"}, "exp": {q.Get("exp")}, "sig": {"x" + q.Get("sig")[1:]}}
	other := url.Values{"p": {"test"}, "u": {"UBOB"}, "exp": {q.Get("exp")}, "sig": {q.Get("sig")}}
	later := url.Values{"p": {"test"}, "u": {"UALICE"}, "exp": {"99999999999"}, "sig": {q.Get("sig")}}
	for name, link := range map[string]string{
		"tampered signature": "?" + tampered.Encode(),
		"another person":     "?" + other.Encode(),
		"expiry moved later": "?" + later.Encode(),
		"expired":            e.ExportLink("test", "UALICE", time.Now().Add(-time.Second)),
		"no signature":       "?p=test&u=UALICE&exp=" + q.Get("exp"),
	} {
		if code, body := get(link); code != http.StatusForbidden || strings.Contains(body, "UALICE") {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
}
