package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// downJournal is the journal behind a database that can go away: while
// down, every call fails as a lost connection would.
type downJournal struct {
	core.Journal
	down atomic.Bool
}

var errDBDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (j *downJournal) Append(ctx context.Context, d ...core.Draft) ([]core.Command, error) {
	if j.down.Load() {
		return nil, errDBDown
	}
	return j.Journal.Append(ctx, d...)
}

func (j *downJournal) AppendAt(ctx context.Context, exp core.Expect, d ...core.Draft) ([]core.Command, error) {
	if j.down.Load() {
		return nil, errDBDown
	}
	return j.Journal.AppendAt(ctx, exp, d...)
}

func (j *downJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	if j.down.Load() {
		return nil, errDBDown
	}
	return j.Journal.Read(ctx, ch, from, limit)
}

func (j *downJournal) ReadRun(ctx context.Context, run string) ([]core.Command, error) {
	if j.down.Load() {
		return nil, errDBDown
	}
	return j.Journal.ReadRun(ctx, run)
}

// TestRunSurvivesAJournalOutage: the database goes away in the middle of a
// tool call and stays away past the outage notice. The run says it is
// blocked on its checklist, and when the database returns it finishes by
// itself — no restart, no new message — answering exactly once.
func TestRunSurvivesAJournalOutage(t *testing.T) {
	dj := &downJournal{}
	var calls atomic.Int32
	tool := core.Tool{Name: "slow", Description: "a tool during which the database dies", Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{}}`),
		Run: func(ctx context.Context, tc core.ToolContext, _ json.RawMessage) (core.Observation, error) {
			if calls.Add(1) == 1 {
				dj.down.Store(true)
			}
			return core.Observation{Text: "ok", Trust: core.Trusted}, nil
		}}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "slow", `{}`)), coretest.Text("all done"))
	h := newHarness(t, m, []core.Tool{tool}, func(c *engine.Config) {
		dj.Journal = c.Journal
		c.Journal = dj
		c.RetryBackoff = 5 * time.Millisecond
		c.OutageNotice = 50 * time.Millisecond
	})
	ev := h.mention(alice, "C1", "do the slow thing")
	h.deliver(ev)
	waitFor(t, "the checklist to say the database is unavailable", func() bool {
		for _, p := range h.s.Posts() {
			if cur, ok := h.s.Current(p.Ref.ID); ok && strings.Contains(cur.Text, "database is unavailable") {
				return true
			}
		}
		return false
	})
	dj.down.Store(false)
	h.idle()
	var answers int
	for _, p := range h.s.Posts() {
		if p.Out.Text == "all done" {
			answers++
		}
	}
	if answers != 1 {
		t.Fatalf("answers = %d, want exactly 1: %+v", answers, h.s.Posts())
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunDone {
			t.Errorf("run %s (%s), want done", r.Status, r.Reason)
		}
	}
	cl, _ := h.s.Current(h.s.Posts()[0].Ref.ID)
	if strings.Contains(cl.Text, "unavailable") || !strings.HasPrefix(cl.Text, "✅") {
		t.Errorf("checklist after recovery = %q", cl.Text)
	}
	h.verify("C1")
}
