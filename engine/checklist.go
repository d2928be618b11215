package engine

import (
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// The checklist is the run's one progress message, posted before the first
// model call and edited in place until a visible terminal state. Its text is
// a pure function of the run's replayed state, so a resumed run renders
// exactly what it would have rendered before the crash.

const maxChecklistLines = 10

func checklistHeader(rs *RunReplay) string {
	switch rs.Status {
	case core.RunQueued, core.RunWorking:
		return "⏳ Working on it…"
	case core.RunWaitingApproval:
		if a := rs.pendingApproval(); a != nil && a.req.Question != "" {
			return "❓ Waiting for an answer (see the card below)"
		}
		return "🔐 Waiting for approval (see the card below)"
	case core.RunNeedsPermission:
		return "🔐 Needs permission — " + rs.Reason
	case core.RunBlocked:
		return "⏸ Paused — " + rs.Reason
	case core.RunBroken:
		return "❌ Failed — " + rs.Reason
	case core.RunCancelled:
		return "🚫 Stopped — " + rs.Reason
	case core.RunDone:
		return "✅ Done"
	}
	panic(fmt.Sprintf("core: unhandled run status %q", rs.Status))
}

// renderChecklist renders the checklist text of rs.
func renderChecklist(rs *RunReplay) string {
	lines := []string{checklistHeader(rs)}
	for _, it := range rs.plan {
		mark := "☐"
		if it.Done || rs.Status == core.RunDone {
			mark = "☑"
		}
		lines = append(lines, mark+" "+core.Truncate(it.Text, 120))
	}
	if len(rs.plan) == 0 && len(rs.trail) == 0 && rs.Steps == 0 && !rs.Status.Terminal() {
		lines = append(lines, "• Reading your request")
	}
	trail := rs.trail
	if room := maxChecklistLines - len(lines); room >= 0 && len(trail) > room {
		trail = trail[len(trail)-room:]
	}
	for _, t := range trail {
		switch {
		case t.label != "":
			lines = append(lines, "✓ "+t.label)
		case t.ok:
			lines = append(lines, "✓ "+toolLabel(t.tool))
		case t.code == "":
			lines = append(lines, "✗ "+toolLabel(t.tool))
		default:
			lines = append(lines, "✗ "+toolLabel(t.tool)+" ("+t.code+")")
		}
	}
	if r := rs.running; r != nil && !rs.Status.Terminal() {
		lines = append(lines, r.line())
	}
	if a := rs.pendingApproval(); a != nil && rs.Status == core.RunWaitingApproval {
		if a.req.Question != "" {
			lines = append(lines, "… asked: "+core.Truncate(a.req.Question, 120))
		} else {
			lines = append(lines, "… "+toolLabel(a.req.Tool)+" — waiting for approval")
		}
	}
	return strings.Join(lines, "\n")
}

func toolLabel(name string) string { return strings.ReplaceAll(name, "_", " ") }
