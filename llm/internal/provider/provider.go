// Package provider holds what the SDK-backed model providers share: config
// checks, the mapping of transport and HTTP failures onto core.ModelFailure,
// Retry-After parsing, the retry-delay cap, call ids and defaults.
package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// Defaults shared by the providers.
const (
	DefaultTimeout       = 60 * time.Second
	DefaultMaxRetries    = 1
	DefaultMaxRetryDelay = 2 * time.Second
)

// ProbeHeader marks the start-up and doctor probes (a minimal real call), so
// a server or a test fake can tell them from conversation calls.
const ProbeHeader = "X-Marlowe-Probe"

// NoRetries, as a provider Config.MaxRetries, disables the SDK's own retries.
const NoRetries = -1

// Retries resolves a Config.MaxRetries value: 0 means the default, a negative
// value means none.
func Retries(n int) int {
	switch {
	case n == 0:
		return DefaultMaxRetries
	case n < 0:
		return 0
	}
	return n
}

// CheckEndpoint reports a missing model name, or a base URL that is not an
// absolute http(s) URL.
func CheckEndpoint(model, baseURL string) error {
	if strings.TrimSpace(model) == "" {
		return errors.New("model name is required")
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an http(s) URL", baseURL)
	}
	return nil
}

// Or returns d, or def when d is not positive.
func Or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// HTTPFailure is what a provider knows about a failed call: the SDK error and,
// when the server answered, its status and headers.
type HTTPFailure struct {
	Status int
	Header http.Header
	Err    error
}

// APIError is what an SDK's error type says about an answer the server
// refused (both SDKs' *Error carry these fields).
type APIError struct {
	Status   int
	Response *http.Response
	Message  string // the provider's explanation, from the error body
}

// NewHTTPFailure describes a failed SDK call: from api when the server
// answered with an error (api is nil otherwise), else from raw, the response
// the call captured before failing (nil when there was none). The
// provider's explanation, shortened, is added to err.
func NewHTTPFailure(err error, api *APIError, raw *http.Response) HTTPFailure {
	f := HTTPFailure{Err: err}
	switch {
	case api != nil && api.Status != 0:
		f.Status = api.Status
		if api.Response != nil {
			f.Header = api.Response.Header
		}
		if msg := Excerpt(api.Message); msg != "" {
			f.Err = fmt.Errorf("%w: %s", err, msg)
		}
	case raw != nil:
		f.Status, f.Header = raw.StatusCode, raw.Header
	}
	return f
}

// Classify turns a failed provider call into the error Step returns.
//
// callerCtx is the context the caller passed in; callCtx the one the call ran
// under (callerCtx plus the per-call timeout). A cancellation by the caller is
// returned as a plain wrapped error (errors.Is(err, context.Canceled)), not as
// a *core.ModelError: the run was stopped, no provider failed, so nothing
// should fail over. Every other failure is a *core.ModelError.
func Classify(name string, callerCtx, callCtx context.Context, f HTTPFailure) error {
	err := f.Err
	if err == nil {
		err = fmt.Errorf("status %d", f.Status)
	}
	if errors.Is(callerCtx.Err(), context.Canceled) {
		if !errors.Is(err, context.Canceled) {
			err = errors.Join(context.Canceled, err)
		}
		return fmt.Errorf("model %s: call cancelled: %w", name, err)
	}
	me := &core.ModelError{Provider: name, Err: err, Status: f.Status}
	switch {
	case callCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isNetTimeout(err):
		me.Failure = core.FailTimeout
		if !errors.Is(err, context.DeadlineExceeded) {
			me.Err = errors.Join(context.DeadlineExceeded, err)
		}
	case f.Status == 0:
		// No answer at all: connection refused, reset, DNS, TLS.
		me.Failure = core.FailUnavailable
	default:
		me.Failure = StatusFailure(f.Status)
		if me.Failure == core.FailRateLimited {
			me.RetryAfter = RetryAfter(f.Header, time.Now())
		}
	}
	return me
}

// StatusFailure maps an HTTP status of a failed call onto a failure kind.
func StatusFailure(status int) core.ModelFailure {
	switch {
	case status == http.StatusTooManyRequests:
		return core.FailRateLimited
	case status == http.StatusUnauthorized, status == http.StatusForbidden,
		status == http.StatusPaymentRequired: // out of credit: an account problem
		return core.FailAuth
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return core.FailTimeout
	case status == http.StatusConflict, status >= 500:
		return core.FailUnavailable
	case status >= 400:
		return core.FailBadRequest
	}
	// A 2xx (or 1xx/3xx) that still failed: the body was not what we expected.
	return core.FailBadResponse
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Explain lets fn add what a person needs (the endpoint, the likely cause)
// to err when it is a *core.ModelError; fn may be nil. It returns err.
func Explain(err error, fn func(*core.ModelError)) error {
	if fn == nil || err == nil {
		return err
	}
	if me, ok := core.AsModelError(err); ok {
		fn(me)
	}
	return err
}

// BadResponse is the error for an answer that parsed but cannot be used.
func BadResponse(name string, format string, args ...any) error {
	return &core.ModelError{Provider: name, Failure: core.FailBadResponse, Err: fmt.Errorf(format, args...)}
}

// BadRequest is the error for a view that cannot be turned into a request.
func BadRequest(name string, err error) error {
	return &core.ModelError{Provider: name, Failure: core.FailBadRequest, Err: err}
}

// RetryAfter reads Retry-After-Ms, then Retry-After (seconds or an HTTP date).
// It returns 0 when neither is present or usable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return clampDuration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return 0
		}
		return clampDuration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

func clampDuration(f float64) time.Duration {
	if f >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(f)
}

// Middleware has the shape of both SDKs' option.Middleware.
type Middleware = func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error)

// CapRetryDelay returns a middleware that tells the SDK not to retry a
// response whose Retry-After asks for more than max: the call then fails at
// once with that response (429 → FailRateLimited with RetryAfter), and the
// caller — failover, or the run loop — decides what to do with the wait.
func CapRetryDelay(max time.Duration) Middleware {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		res, err := next(req)
		if err != nil || res == nil {
			return res, err
		}
		if res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500 {
			if d := RetryAfter(res.Header, time.Now()); d > max {
				res.Header.Set("X-Should-Retry", "false")
			}
		}
		return res, nil
	}
}

// CallID returns a fresh tool-call id for servers that send none.
func CallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// HTTPClient returns c, or a client of its own over the default transport.
func HTTPClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{}
}

// Excerpt shortens a provider's error message for logs and error strings.
func Excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
