package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/exporttest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// GET /export serves the export a signed link names, and refuses (403,
// nothing read) a link whose signature was tampered with, one re-pointed
// at another person, one whose expiry was moved, and one unsigned.
func TestExportLink(t *testing.T) {
	e, _ := testengine.Start(t, coretest.NewFakeSurface("test", "UBOT"), nil, nil)
	srv := httptest.NewServer(exportHandler(e))
	defer srv.Close()
	get := getter(t, srv)
	good := e.ExportLink("test", "UALICE", "", time.Now().Add(time.Minute))
	code, body := get(good)
	var ex engine.Export
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ex) != nil || ex.User != "UALICE" || ex.Platform != "test" {
		t.Fatalf("good link: %d %s", code, body)
	}
	if code, body := get(e.ExportLink("test", "UALICE", "", time.Now().Add(-time.Second))); code != http.StatusGone || strings.Contains(body, "UALICE") {
		t.Errorf("expired: %d %s", code, body)
	}
	u, _ := url.Parse(good)
	q := u.Query()
	// One character changed (a signature that begins with "x" gets "y":
	// "x" for "x" changed nothing, 1 run in 64).
	sig := q.Get("sig")
	first := "x"
	if strings.HasPrefix(sig, first) {
		first = "y"
	}
	tampered := url.Values{"p": {"test"}, "u": {"UALICE"}, "exp": {q.Get("exp")}, "sig": {first + sig[1:]}}
	other := url.Values{"p": {"test"}, "u": {"UBOB"}, "exp": {q.Get("exp")}, "sig": {q.Get("sig")}}
	later := url.Values{"p": {"test"}, "u": {"UALICE"}, "exp": {"99999999999"}, "sig": {q.Get("sig")}}
	for name, link := range map[string]string{
		"tampered signature": "?" + tampered.Encode(),
		"another person":     "?" + other.Encode(),
		"expiry moved later": "?" + later.Encode(),
		"no signature":       "?p=test&u=UALICE&exp=" + q.Get("exp"),
	} {
		if code, body := get(link); code != http.StatusForbidden || strings.Contains(body, "UALICE") {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
}

// getter GETs a link's query from srv's /export.
func getter(t *testing.T, srv *httptest.Server) func(link string) (int, string) {
	return func(link string) (int, string) {
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
}

// readCounter counts the journal reads an export could make.
type readCounter struct {
	core.Journal
	reads atomic.Int64
}

func (r *readCounter) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	r.reads.Add(1)
	return r.Journal.Read(ctx, ch, from, limit)
}

func (r *readCounter) ReadRun(ctx context.Context, run string) ([]core.Command, error) {
	r.reads.Add(1)
	return r.Journal.ReadRun(ctx, run)
}

func (r *readCounter) Channels(ctx context.Context) ([]core.ChannelKey, error) {
	r.reads.Add(1)
	return r.Journal.Channels(ctx)
}

// An export is built once, when asked for: GET /export serves the stored
// archive, twice the same bytes without reading any journal; once the link
// expired the archive is deleted and the link answers 410.
func TestExportIsServedFromTheStoredArchive(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	clk := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	b := core.NewBoundary(clk)
	mem := coretest.NewMemJournal(coretest.NewSigner(t))
	for i := range 5 {
		sc := core.Scope{Platform: "test", Workspace: "W", Channel: "C" + strconv.Itoa(i)}
		d, err := b.Human(core.Person{ID: "UALICE", Name: "alice"}, sc, core.Meta{}, &core.MessageReceived{MessageID: "M" + strconv.Itoa(i), Author: core.Person{ID: "UALICE", Name: "alice"}, Visibility: core.Public, Text: "note " + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	j := &readCounter{Journal: mem}
	store := &exporttest.Mem{}
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: b, Clock: clk, CardKey: []byte("export-test-card-key-0123456789abcdef"),
		Surfaces: map[string]core.Surface{"test": coretest.NewFakeSurface("test", "UBOT")},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return false, "", nil }),
		Exports:  store, ExportURL: "https://bot.example",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	srv := httptest.NewServer(exportHandler(e))
	defer srv.Close()
	get := getter(t, srv)

	link, err := e.StoreExport(ctx, "test", "UALICE")
	if err != nil {
		t.Fatal(err)
	}
	if store.Len() != 1 {
		t.Fatalf("%d archives stored, want 1", store.Len())
	}
	built := j.reads.Load()
	code1, body1 := get(link)
	code2, body2 := get(link)
	if code1 != http.StatusOK || code2 != http.StatusOK || !strings.Contains(body1, "note 4") {
		t.Fatalf("GET /export: %d, %d: %s", code1, code2, body1)
	}
	if body1 != body2 {
		t.Error("two GETs of one link served different bytes")
	}
	if n := j.reads.Load() - built; n != 0 {
		t.Errorf("two GETs read the journal %d times, want none (the archive is stored)", n)
	}
	clock.Add(int64(16 * time.Minute))
	if code, body := get(link); code != http.StatusGone || strings.Contains(body, "note") {
		t.Errorf("after expiry: %d %s, want 410", code, body)
	}
	if store.Len() != 0 {
		t.Errorf("%d archives kept after the link expired, want none", store.Len())
	}
}
