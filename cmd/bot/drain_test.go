//go:build unix

package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/llm"
)

// drainModel is the crash test's model with a brake: each call of the run
// (not serve's start-up probe) is held for delay, or until the bot hangs
// up when hang is set, and started hears of each call.
type drainModel struct {
	*crashModel
	url     string
	delay   atomic.Int64 // nanoseconds
	hang    atomic.Bool
	started chan struct{}
	quit    chan struct{} // closed at cleanup: a held call never outlives the test
}

func newDrainModel(t *testing.T) *drainModel {
	m := &drainModel{crashModel: &crashModel{n: map[string]int{}}, started: make(chan struct{}, 16), quit: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(llm.ProbeHeader) == "" {
			select {
			case m.started <- struct{}{}:
			default:
			}
			if m.hang.Load() {
				select { // until the bot closes the call
				case <-r.Context().Done():
				case <-m.quit:
				}
				return
			}
			select {
			case <-time.After(time.Duration(m.delay.Load())):
			case <-r.Context().Done():
				return
			}
		}
		m.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(m.quit) })
	m.url = srv.URL + "/v1"
	return m
}

// sigterm sends SIGTERM and waits up to limit for the process to exit;
// it returns how long that took and fails unless the exit status is 0.
func (b *crashBot) sigterm(limit time.Duration) time.Duration {
	b.t.Helper()
	start := time.Now()
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(limit):
		b.kill()
		b.t.Fatalf("bot did not exit within %s of SIGTERM:\n%s", limit, b.logs.String())
	}
	took := time.Since(start)
	b.cmd = nil
	if b.err != nil {
		b.t.Fatalf("bot exited with %v after SIGTERM, want status 0:\n%s", b.err, b.logs.String())
	}
	return took
}

// TestSIGTERMDrainLetsTheRunFinish: SIGTERM in the middle of a run (its
// three model calls take ~2 s) turns /readyz 503 at once, lets the run
// finish within MARLOWE_DRAIN_TIMEOUT, and exits 0: the journal has the
// run completed, every message posted exactly once, nothing left to
// resume.
func TestSIGTERMDrainLetsTheRunFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot binary (-short skips it)")
	}
	bin := buildCrashBot(t)
	m := newDrainModel(t)
	m.delay.Store(int64(700 * time.Millisecond))
	b := newCrashBot(t, bin, m.url, "drain")
	b.env = append(b.env, "MARLOWE_DRAIN_TIMEOUT=20s")
	b.start()
	addr := readyRE.FindStringSubmatch(b.logs.String())[1]
	if code, body := getReady(t, addr); code != http.StatusOK {
		t.Fatalf("readyz before SIGTERM = %d %q", code, body)
	}
	b.say(crashPrompt(b.token))
	<-m.started // the run's first model call is in flight

	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	// The signal is delivered asynchronously: readiness must turn within
	// moments, while the run (700 ms a model call) is still in hand.
	var code int
	var body string
	for deadline := time.Now().Add(500 * time.Millisecond); ; time.Sleep(5 * time.Millisecond) {
		code, body = getReady(t, addr)
		if code == http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "drain: draining for shutdown") {
		t.Fatalf("readyz after SIGTERM = %d %q, want 503 naming the drain", code, body)
	}
	select {
	case <-b.exited:
	case <-time.After(20 * time.Second):
		b.kill()
		t.Fatalf("bot did not exit within the 20 s drain timeout:\n%s", b.logs.String())
	}
	b.cmd = nil
	if b.err != nil {
		t.Fatalf("bot exited with %v after SIGTERM, want status 0:\n%s", b.err, b.logs.String())
	}
	if !strings.Contains(b.logs.String(), "drained: no run in flight") {
		t.Errorf("the log does not say the drain completed:\n%s", b.logs.String())
	}
	if n := b.countKind("run.completed"); n != 1 {
		t.Fatalf("run.completed = %d after the drain, want 1 (the run finished before exit):\n%s", n, b.logs.String())
	}
	b.check() // one answer, one checklist, one note, each posted once
	b.verify()
}

// TestSIGTERMDrainTimeoutResumesAfterRestart: a run whose model call does
// not return within MARLOWE_DRAIN_TIMEOUT is closed mid-step; the bot still
// exits 0, promptly, and the next start resumes the run from the journal
// and finishes it exactly once.
func TestSIGTERMDrainTimeoutResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot binary (-short skips it)")
	}
	bin := buildCrashBot(t)
	m := newDrainModel(t)
	m.hang.Store(true)
	b := newCrashBot(t, bin, m.url, "draintimeout")
	b.env = append(b.env, "MARLOWE_DRAIN_TIMEOUT=1s")
	b.start()
	b.say(crashPrompt(b.token))
	<-m.started
	if took := b.sigterm(10 * time.Second); took < time.Second {
		t.Errorf("exited %s after SIGTERM, before the 1 s drain timeout", took)
	}
	if !strings.Contains(b.logs.String(), "drain timed out") {
		t.Errorf("the log does not say the drain timed out:\n%s", b.logs.String())
	}
	if n := b.countKind("run.completed"); n != 0 {
		t.Fatalf("run.completed = %d with the model hung, want 0", n)
	}
	m.hang.Store(false)
	b.start()
	b.waitRunEnd(30 * time.Second)
	b.sigterm(20 * time.Second)
	b.check()
	b.verify()
}
