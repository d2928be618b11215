package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

func TestStatusFailure(t *testing.T) {
	for status, want := range map[int]core.ModelFailure{
		200: core.FailBadResponse, 400: core.FailBadRequest, 401: core.FailAuth, 402: core.FailAuth,
		403: core.FailAuth, 404: core.FailBadRequest, 408: core.FailTimeout, 409: core.FailUnavailable,
		413: core.FailBadRequest, 422: core.FailBadRequest, 429: core.FailRateLimited, 500: core.FailUnavailable,
		502: core.FailUnavailable, 503: core.FailUnavailable, 504: core.FailTimeout, 529: core.FailUnavailable,
	} {
		if got := StatusFailure(status); got != want {
			t.Errorf("StatusFailure(%d) = %s, want %s", status, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{nil, 0},
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"0"}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {now.Add(2 * time.Minute).Format(http.TimeFormat)}}, 2 * time.Minute},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"1e300"}}, time.Duration(1<<63 - 1)},
	} {
		if got := RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	bg := context.Background()
	expired, cancel := context.WithTimeout(bg, -time.Second)
	defer cancel()
	cancelled, cancel2 := context.WithCancel(bg)
	cancel2()

	me := func(err error) *core.ModelError {
		t.Helper()
		m, ok := core.AsModelError(err)
		if !ok {
			t.Fatalf("not a ModelError: %v", err)
		}
		return m
	}
	if m := me(Classify("p", bg, bg, HTTPFailure{Status: 429, Header: http.Header{"Retry-After": {"3"}}, Err: errors.New("x")})); m.Failure != core.FailRateLimited || m.RetryAfter != 3*time.Second || m.Provider != "p" {
		t.Errorf("429 → %+v", m)
	}
	if m := me(Classify("p", bg, expired, HTTPFailure{Err: errors.New("read: i/o")})); m.Failure != core.FailTimeout || !errors.Is(m, context.DeadlineExceeded) {
		t.Errorf("expired call → %+v", m)
	}
	if m := me(Classify("p", bg, bg, HTTPFailure{Err: errors.New("dial tcp: connection refused")})); m.Failure != core.FailUnavailable {
		t.Errorf("no status → %+v", m)
	}
	if m := me(Classify("p", bg, bg, HTTPFailure{Status: 200, Err: errors.New("error parsing response json")})); m.Failure != core.FailBadResponse {
		t.Errorf("2xx → %+v", m)
	}
	err := Classify("p", cancelled, cancelled, HTTPFailure{Err: context.Canceled})
	if _, ok := core.AsModelError(err); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled → %v", err)
	}
}

func TestNewHTTPFailure(t *testing.T) {
	sdkErr := errors.New("POST /v1/messages: 429")
	hdr := http.Header{"Retry-After": {"3"}}
	f := NewHTTPFailure(sdkErr, &APIError{Status: 429, Response: &http.Response{Header: hdr}, Message: "  slow\n down "}, nil)
	if f.Status != 429 || f.Header.Get("Retry-After") != "3" || !errors.Is(f.Err, sdkErr) || !strings.HasSuffix(f.Err.Error(), ": slow down") {
		t.Errorf("from the API error: %+v (err %v)", f, f.Err)
	}
	raw := &http.Response{StatusCode: 200, Header: http.Header{"X": {"y"}}}
	if f := NewHTTPFailure(sdkErr, nil, raw); f.Status != 200 || f.Header.Get("X") != "y" || f.Err != sdkErr {
		t.Errorf("from the raw response: %+v", f)
	}
	if f := NewHTTPFailure(sdkErr, &APIError{}, nil); f.Status != 0 || f.Err != sdkErr {
		t.Errorf("no answer: %+v", f)
	}
}

func TestCheckEndpoint(t *testing.T) {
	if err := CheckEndpoint("m", "http://127.0.0.1:11434/v1"); err != nil {
		t.Errorf("valid endpoint: %v", err)
	}
	for _, tc := range []struct{ model, base string }{
		{" ", "https://api.example.com"}, {"m", "ftp://example.com"}, {"m", "http:///v1"}, {"m", "::"},
	} {
		if err := CheckEndpoint(tc.model, tc.base); err == nil {
			t.Errorf("CheckEndpoint(%q, %q) accepted", tc.model, tc.base)
		}
	}
}

func TestSchemaObject(t *testing.T) {
	got, err := SchemaObject(json.RawMessage(` {"type":"object","properties":{"n":{"maximum":12345678901234567890}}} `))
	if err != nil {
		t.Fatal(err)
	}
	if string(got["properties"]) != `{"n":{"maximum":12345678901234567890}}` {
		t.Errorf("properties = %s", got["properties"])
	}
	for _, empty := range []string{"", "  ", "null"} {
		got, err := SchemaObject(json.RawMessage(empty))
		if err != nil || string(got["type"]) != `"object"` || string(got["properties"]) != `{}` {
			t.Errorf("SchemaObject(%q) = %v, %v", empty, got, err)
		}
	}
	for _, bad := range []string{`{`, `[]`, `"x"`, `{} {}`, `{"a":1} x`} {
		if _, err := SchemaObject(json.RawMessage(bad)); err == nil {
			t.Errorf("SchemaObject(%q) accepted", bad)
		}
	}
}

func TestArgsObject(t *testing.T) {
	for in, want := range map[string]string{
		``:                `{}`,
		`  `:              `{}`,
		`{"a":1}`:         `{"a":1}`,
		` {"a": [1, 2]} `: `{"a": [1, 2]}`,
		`{"a":`:           `{"_raw_arguments":"{\"a\":"}`,
		`[1,2]`:           `{"_raw_arguments":"[1,2]"}`,
		`"s"`:             `{"_raw_arguments":"\"s\""}`,
	} {
		if got := string(ArgsObject(in)); got != want {
			t.Errorf("ArgsObject(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := Excerpt("  a\n b  "); got != "a b" {
		t.Errorf("Excerpt = %q", got)
	}
	long := strings.Repeat("é", 400)
	if got := Excerpt(long); !strings.HasSuffix(got, "…") || len(got) > 304 {
		t.Errorf("Excerpt(long) = %d bytes", len(got))
	}
}

func TestRetries(t *testing.T) {
	if Retries(0) != DefaultMaxRetries || Retries(NoRetries) != 0 || Retries(3) != 3 {
		t.Error("Retries")
	}
}
