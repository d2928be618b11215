package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

const memoriesPage = 10

// ListMemories lists the channel's memories, newest first, a page at a
// time: what the model uses for "what do you remember?". It reads; deleting
// stays a person's own command (`delete memory <id>`), because a privacy
// deletion is done in someone's name and a tool has no name to give.
func ListMemories() core.Tool {
	return core.Tool{
		Name:        "list_memories",
		Description: "List this channel's memories, newest first, with their ids and who added them (10 per page).",
		Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"page":{"type":"integer","description":"page number, from 1 (default 1)"}}}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Page int }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			if tc.Memory == nil {
				return core.Observation{}, errNoMemory
			}
			l, ok := tc.Memory.(core.MemoryLister)
			if !ok {
				return core.Observation{}, errors.New("this channel's memory cannot list its memories")
			}
			if a.Page < 1 || a.Page > 1000 {
				a.Page = 1
			}
			got, err := l.ListMemories(ctx, (a.Page-1)*memoriesPage, memoriesPage+1)
			if err != nil {
				return core.Observation{}, fmt.Errorf("list memories: %w", err)
			}
			if len(got) == 0 {
				return trusted("No memories on page %d.", a.Page), nil
			}
			var b strings.Builder
			for i, m := range got {
				if i == memoriesPage {
					fmt.Fprintf(&b, "\n(more on page %d)", a.Page+1)
					break
				}
				who := "the operator"
				switch au := m.Author(); {
				case au != "":
					who = "<@" + au + ">"
				case m.By.Type == core.ActorAgent:
					who = "an assistant run"
				}
				if i > 0 {
					b.WriteByte('\n')
				}
				fmt.Fprintf(&b, "• [%s] %s (added by %s, %s)", m.ID, m.Text, who, m.At.UTC().Format("2006-01-02"))
			}
			// Notes were written from conversations: data, not orders.
			return core.Observation{Text: b.String(), Trust: core.Untrusted}, nil
		},
	}
}
