package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
)

// Digest compiles the deterministic digest of a channel (no model): what
// happened after seq since — runs finished with the first line of each
// result, approvals and questions still pending (whenever asked), memories
// added and not forgotten. The same commands always give the same text.
func Digest(r *Routine, cmds []core.Command, since uint64, sinceAt, now time.Time) string {
	type run struct {
		request, result string
		done            bool
		failed          string
		command         bool // a chat command (help, routines, recall …): counted, not listed as work
	}
	runs := map[string]*run{}
	var finished []string
	type pending struct{ line string }
	approvals := map[string]*core.ApprovalRequested{}
	var approvalOrder []string
	memories := map[string]string{}
	var memOrder []string
	for _, c := range cmds {
		if c.Redacted() {
			continue
		}
		after := c.Seq() > since
		get := func() *run {
			x := runs[c.Run()]
			if x == nil {
				x = &run{}
				runs[c.Run()] = x
			}
			return x
		}
		switch c.Kind() {
		case core.KindMessageReceived:
			if p, err := core.Decode[*core.MessageReceived](c); err == nil && c.Run() != "" && get().request == "" {
				text := chatcommand.StripLeadingMention(p.Text, p.Mentions)
				get().request = text
				get().command = chatcommand.Parse(text).Kind != chatcommand.Unknown || chatcommand.ParseInbox(text).Kind != chatcommand.InboxNone
			}
		case core.KindModelStep:
			if p, err := core.Decode[*core.ModelStep](c); err == nil && p.Final && c.Run() != "" {
				get().result = p.Text
			}
		case core.KindRunCompleted:
			if p, err := core.Decode[*core.RunCompleted](c); err == nil && after {
				x := get()
				if x.result == "" {
					x.result = p.Summary
				}
				x.done = true
				finished = append(finished, c.Run())
			}
		case core.KindRunFailed:
			if p, err := core.Decode[*core.RunFailed](c); err == nil && after {
				get().failed = string(p.Status) + ": " + p.Cause
				finished = append(finished, c.Run())
			}
		case core.KindApprovalRequested:
			if p, err := core.Decode[*core.ApprovalRequested](c); err == nil {
				approvals[p.ApprovalID] = p
				approvalOrder = append(approvalOrder, p.ApprovalID)
			}
		case core.KindApprovalResolved:
			if p, err := core.Decode[*core.ApprovalResolved](c); err == nil {
				delete(approvals, p.ApprovalID)
			}
		case core.KindMemoryWritten:
			if p, err := core.Decode[*core.MemoryWritten](c); err == nil && after {
				memories[p.MemoryID] = p.Text
				memOrder = append(memOrder, p.MemoryID)
			}
		case core.KindMemoryForgotten:
			if p, err := core.Decode[*core.MemoryForgotten](c); err == nil {
				delete(memories, p.MemoryID)
			}
		case core.KindMemoryRedacted:
			if p, err := core.Decode[*core.MemoryRedacted](c); err == nil {
				delete(memories, p.MemoryID)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "🗓️ Routine %s: %s\n", r.ID, firstLine(r.Instruction, 200))
	fmt.Fprintf(&b, "Since %s:\n", sinceAt.UTC().Format("2006-01-02 15:04 MST"))
	empty := true
	var work, commands []string
	for _, id := range finished {
		if runs[id].command {
			commands = append(commands, firstLine(runs[id].request, 40))
		} else {
			work = append(work, id)
		}
	}
	if len(work) > 0 {
		empty = false
		fmt.Fprintf(&b, "\n*Runs finished (%d)*\n", len(work))
		for _, id := range work {
			x := runs[id]
			line := firstLine(x.result, 200)
			if x.failed != "" {
				line = "✗ " + firstLine(x.failed, 200)
			} else if line == "" {
				line = "(no answer text)"
			}
			fmt.Fprintf(&b, "• “%s” → %s\n", firstLine(x.request, 80), line)
		}
	}
	if len(commands) > 0 {
		empty = false
		fmt.Fprintf(&b, "\n*Commands answered (%d)*: %s\n", len(commands), strings.Join(commands, ", "))
	}
	var open []*core.ApprovalRequested
	for _, id := range approvalOrder {
		if a := approvals[id]; a != nil && now.Before(a.ExpiresAt) {
			open = append(open, a)
			delete(approvals, id) // listed once
		}
	}
	if len(open) > 0 {
		empty = false
		fmt.Fprintf(&b, "\n*Waiting for people (%d)*\n", len(open))
		for _, a := range open {
			what := a.Tool + ": " + firstLine(a.Summary, 120)
			if a.Question != "" {
				what = "question: " + firstLine(a.Question, 120)
			}
			fmt.Fprintf(&b, "• %s (asked for <@%s>, expires %s)\n", what, a.Requester, a.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
		}
	}
	var mems []string
	for _, id := range memOrder {
		if t, ok := memories[id]; ok {
			mems = append(mems, fmt.Sprintf("• %s (%s)", firstLine(t, 160), id))
			delete(memories, id)
		}
	}
	if len(mems) > 0 {
		empty = false
		fmt.Fprintf(&b, "\n*Memories added (%d)*\n%s\n", len(mems), strings.Join(mems, "\n"))
	}
	if empty {
		b.WriteString("Nothing new: no runs finished, nothing waiting, no memories added.\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}
