// Package llmtest has fake model servers that speak the OpenAI and Anthropic
// wire formats, for tests that drive the real SDK clients (and for running
// the bot by hand without a model: see NewOpenAI and ./fakemodel).
//
// A fake answers each request with the next queued Response; with nothing
// queued it answers deterministically (an echo of the last message, hashed
// embedding vectors). Every request is recorded, body and all. A probe (a
// request with the X-Marlowe-Probe header: bot doctor, serve's start-up
// check) gets the default answer, consumes nothing queued and is recorded
// apart (Probes), so a scripted conversation is not disturbed by it.
package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/llm/internal/provider"
)

// Response is one scripted answer of a fake server.
type Response struct {
	// Status of the answer; 0 means 200.
	Status int
	// Header is added to the answer (e.g. Retry-After).
	Header http.Header
	// Text is the assistant's text.
	Text string
	// ToolCalls are the assistant's tool calls.
	ToolCalls []ToolCall
	// Usage reported; zero means an estimate from the request and answer sizes.
	Usage Usage
	// Model reported; empty means the model the request named.
	Model string
	// ErrorMessage is the message of an error answer (Status >= 400 without Body).
	ErrorMessage string
	// Body, when set, is sent verbatim instead of a generated body (with
	// Content-Type application/json unless Header sets one): malformed JSON,
	// empty choices, whatever a test needs.
	Body string
	// Hang holds the request until the client gives up or the fake is closed.
	Hang bool
	// Delay waits this long before answering.
	Delay time.Duration
	// Until, when set, holds the answer until it is closed (an event the
	// test awaits, such as an indicator shown while the model works).
	Until <-chan struct{}
	// Vectors answer an embeddings request (one per input text).
	Vectors [][]float32

	// Streaming (a request with "stream": true; OpenAI's wire format):
	// Pieces is how many chunks the text is cut into (0: 4), PieceDelay
	// the wait before each, and CutAfter > 0 ends the response after that
	// many text chunks without finishing it (a connection lost mid-stream).
	Pieces     int
	PieceDelay time.Duration
	CutAfter   int
}

// ToolCall is a scripted tool call. Args is the raw argument text: any text
// for OpenAI (malformed JSON included), a JSON value for Anthropic (text that
// is not JSON is sent as a JSON string).
type ToolCall struct {
	ID   string // empty: the fake numbers them call_1, call_2, ...
	Name string
	Args string
}

// Usage is reported token usage.
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// Text is a plain text answer.
func Text(text string) Response { return Response{Text: text} }

// Tools is an answer that calls tools.
func Tools(calls ...ToolCall) Response { return Response{ToolCalls: calls} }

// Call is a tool call with raw argument text.
func Call(id, name, args string) ToolCall { return ToolCall{ID: id, Name: name, Args: args} }

// Error is an error answer with the provider's error body.
func Error(status int, message string) Response {
	return Response{Status: status, ErrorMessage: message}
}

// RateLimited is a 429 with the given Retry-After header value (seconds or an
// HTTP date; empty sends none).
func RateLimited(retryAfter string) Response {
	r := Error(http.StatusTooManyRequests, "rate limited")
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return r
}

// Unavailable is a 503.
func Unavailable() Response { return Error(http.StatusServiceUnavailable, "overloaded") }

// Hang is an answer that never comes.
func Hang() Response { return Response{Hang: true} }

// Raw is an answer with a verbatim body.
func Raw(status int, body string) Response { return Response{Status: status, Body: body} }

// Vectors answers an embeddings request.
func Vectors(vs ...[]float32) Response { return Response{Vectors: vs} }

// Request is a request a fake received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Decode unmarshals the request body into v.
func (r Request) Decode(v any) error { return json.Unmarshal(r.Body, v) }

// fake is what both servers share: the queues, the record, the hang release.
type fake struct {
	// refuseImages: a request carrying an image is answered 400, as a
	// text-only model's server does (SetRefuseImages).
	refuseImages bool
	mu           sync.Mutex
	queues       map[string][]Response
	requests     []Request
	probes       []Request // requests carrying provider.ProbeHeader
	calls        int
	dims         int
	done         chan struct{}
	once         sync.Once
}

// SetRefuseImages makes the fake a model that does not take images: a
// request with an image part (probes too) gets a 400.
func (f *fake) SetRefuseImages(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuseImages = on
}

func (f *fake) refusesImages() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refuseImages
}

// Image is an image part a fake model received.
type Image struct {
	Type string
	Data []byte
}

func (f *fake) init() {
	f.queues = map[string][]Response{}
	f.dims = 8
	f.done = make(chan struct{})
}

func (f *fake) enqueue(endpoint string, rs []Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[endpoint] = append(f.queues[endpoint], rs...)
}

// next is the response for r: the next queued one, except for a probe,
// which always gets the default answer and leaves the queue to the
// conversation a test scripted.
func (f *fake) next(r *http.Request, endpoint string) (Response, bool) {
	if isProbe(r) {
		return Response{}, false
	}
	return f.pop(endpoint)
}

func isProbe(r *http.Request) bool { return r.Header.Get(provider.ProbeHeader) != "" }

func (f *fake) pop(endpoint string) (Response, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[endpoint]
	if len(q) == 0 {
		return Response{}, false
	}
	f.queues[endpoint] = q[1:]
	return q[0], true
}

func (f *fake) pending(endpoint string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queues[endpoint])
}

func (f *fake) record(r *http.Request) (Request, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		return Request{}, err
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	f.mu.Lock()
	if isProbe(r) {
		f.probes = append(f.probes, req)
	} else {
		f.requests = append(f.requests, req)
	}
	f.mu.Unlock()
	return req, nil
}

// Probes returns the probe requests received so far (bot doctor's and
// serve's start-up check), which Requests leaves out.
func (f *fake) Probes() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.probes...)
}

// Requests returns every request received so far, in order, probes aside.
func (f *fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// SetDims sets the dimension of default embedding vectors (default 8).
func (f *fake) SetDims(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > 0 {
		f.dims = n
	}
}

// Release lets every hanging request go (they answer 503) and makes later
// Hang answers return at once. Closing a test server calls it.
func (f *fake) Release() { f.once.Do(func() { close(f.done) }) }

func (f *fake) callID(id string) string {
	if id != "" {
		return id
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return fmt.Sprintf("call_%d", f.calls)
}

// wait applies Hang and Delay; false means the client left or the fake closed.
func (f *fake) wait(r *http.Request, resp Response) bool {
	if resp.Hang {
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		return false
	}
	if resp.Until != nil {
		select {
		case <-resp.Until:
		case <-r.Context().Done():
			return false
		case <-f.done:
			return false
		}
	}
	if resp.Delay > 0 {
		t := time.NewTimer(resp.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return false
		case <-f.done:
			return false
		}
	}
	return true
}

// writeRaw sends a verbatim body.
func writeRaw(w http.ResponseWriter, resp Response) {
	copyHeader(w, resp.Header)
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status(resp))
	_, _ = io.WriteString(w, resp.Body)
}

func writeJSON(w http.ResponseWriter, code int, extra http.Header, v any) {
	copyHeader(w, extra)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func copyHeader(w http.ResponseWriter, h http.Header) {
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
}

func status(resp Response) int {
	if resp.Status == 0 {
		return http.StatusOK
	}
	return resp.Status
}

// estimate is a deterministic stand-in for a token count.
func estimate(n int) int { return n/4 + 1 }

// short shortens s to at most n runes, on one line.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// echo is the default answer: a short repeat of the last message.
func echo(lastRole, lastText string) string {
	switch lastRole {
	case "user":
		return "You said: " + short(lastText, 200)
	case "tool":
		return "The tool answered: " + short(lastText, 200)
	}
	return "Hello."
}

// rawArgs makes a JSON value of a tool call's Args (Anthropic wants one).
func rawArgs(args string) json.RawMessage {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(args)
	return b
}

// RefusedURL returns an http URL on which nothing listens: connecting to it
// is refused.
func RefusedURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return "http://" + addr, nil
}

// JSONEqual fails t unless got and want are the same JSON value (key order
// and spacing aside); what names the value in the failure.
func JSONEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: got is not JSON: %v: %s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want is not JSON: %v: %s", what, err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s differs:\n got %s\nwant %s", what, got, want)
	}
}
