package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Drift (ARCHITECTURE.md section 8). The first SettleFirings successful
// firings of an epoch (the routine's creation or its latest edit) settle;
// their mean statistics are then frozen as the anchor. Later firings are
// compared with the anchor, never with recent firings: a routine that
// decays a little each time drifts past any rolling baseline unnoticed but
// not past a frozen one. Sustained means the last SustainedFirings
// successful firings all deviate on the same statistic.
const (
	SettleFirings    = 5
	SustainedFirings = 3
)

// Anchor is an epoch's frozen statistics.
type Anchor struct {
	Epoch uint64
	Stats Stats
}

// Anchors returns the current epoch's anchor (nil while settling), the
// previous epoch's (kept after an edit for comparison; nil if none), and
// the successful firings of the current epoch after it settled.
func Anchors(r *Routine) (cur, prev *Anchor, after []*Firing) {
	byEpoch := map[uint64][]*Firing{}
	var epochs []uint64
	for _, f := range r.Firings {
		if !f.Succeeded() || f.Outcome == OutcomeManual {
			continue
		}
		if _, ok := byEpoch[f.Epoch]; !ok {
			epochs = append(epochs, f.Epoch)
		}
		byEpoch[f.Epoch] = append(byEpoch[f.Epoch], f)
	}
	for _, e := range epochs {
		fs := byEpoch[e]
		if len(fs) < SettleFirings {
			continue
		}
		a := &Anchor{Epoch: e, Stats: mean(fs[:SettleFirings])}
		if e == r.Epoch {
			cur, after = a, fs[SettleFirings:]
		} else if e < r.Epoch {
			prev = a
		}
	}
	return cur, prev, after
}

func mean(fs []*Firing) Stats {
	var t Stats
	for _, f := range fs {
		t.OutputChars += f.Stats.OutputChars
		t.Duration += f.Stats.Duration
		t.ToolCalls += f.Stats.ToolCalls
		t.ToolErrors += f.Stats.ToolErrors
	}
	n := len(fs)
	return Stats{OutputChars: t.OutputChars / n, Duration: t.Duration / time.Duration(n), ToolCalls: t.ToolCalls / n, ToolErrors: t.ToolErrors / n}
}

// Deviations lists the statistics on which x is far from anchor a.
func Deviations(a, x Stats) []string {
	var out []string
	if d := x.OutputChars - a.OutputChars; (2*x.OutputChars < a.OutputChars || x.OutputChars > 2*a.OutputChars) && (d > 50 || d < -50) {
		out = append(out, "output size")
	}
	if x.Duration > 2*a.Duration+10*time.Second {
		out = append(out, "duration")
	}
	if x.ToolCalls > 2*a.ToolCalls+1 || (a.ToolCalls >= 2 && 2*x.ToolCalls < a.ToolCalls) {
		out = append(out, "tool calls")
	}
	if x.ToolErrors >= 1 && x.ToolErrors > 2*a.ToolErrors {
		out = append(out, "tool errors")
	}
	return out
}

// Sustained returns the statistics on which every one of the last
// SustainedFirings of recent deviates from anchor a.
func Sustained(a Stats, recent []Stats) []string {
	if len(recent) < SustainedFirings {
		return nil
	}
	count := map[string]int{}
	var order []string
	for _, x := range recent[len(recent)-SustainedFirings:] {
		for _, m := range Deviations(a, x) {
			if count[m] == 0 {
				order = append(order, m)
			}
			count[m]++
		}
	}
	var out []string
	for _, m := range order {
		if count[m] == SustainedFirings {
			out = append(out, m)
		}
	}
	return out
}

// checkDrift reports sustained drift from the current anchor to the owner,
// once per epoch and statistic.
func (s *Scheduler) checkDrift(ctx context.Context, r *Routine) error {
	cur, prev, after := Anchors(r)
	if cur == nil {
		return nil
	}
	recent := make([]Stats, len(after))
	for i, f := range after {
		recent[i] = f.Stats
	}
	metrics := Sustained(cur.Stats, recent)
	if len(metrics) == 0 {
		return nil
	}
	last := after[len(after)-1]
	fields := []core.CardField{
		{Label: "Anchor", Value: statsLine(cur.Stats) + fmt.Sprintf(" (mean of its first %d successful firings)", SettleFirings)},
		{Label: "Latest", Value: statsLine(last.Stats)},
	}
	if prev != nil {
		fields = append(fields, core.CardField{Label: "Before the last edit", Value: statsLine(prev.Stats)})
	}
	return s.notify(ctx, core.OwnerNotice{Where: r.Scope, Owner: r.Owner,
		Key:   fmt.Sprintf("routine-drift:%s:%d:%s", r.ID, cur.Epoch, strings.ReplaceAll(strings.Join(metrics, "+"), " ", "-")),
		Cause: last.CmdID,
		Title: fmt.Sprintf("📉 Routine %s has drifted: %s", r.ID, strings.Join(metrics, ", ")),
		Body: fmt.Sprintf("Its last %d firings all differ from what it did when it settled, on %s. Check its posts; `routine pause %s` stops it.",
			SustainedFirings, strings.Join(metrics, ", "), r.ID),
		Fields: fields})
}

func statsLine(s Stats) string {
	return fmt.Sprintf("%d chars, %s, %d tool call(s), %d tool error(s)", s.OutputChars, s.Duration.Round(time.Millisecond), s.ToolCalls, s.ToolErrors)
}
