package slack

import (
	"context"
	"fmt"
	"sync"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/marlowe-bot/marlowe/core"
)

// The assistant panel (agent surface): when someone opens it Slack sends
// assistant_thread_started for a new DM thread; the bot gives the thread a
// title and suggested prompts from the person's context: the decisions
// waiting for them, their routines' newest report, the approvals they
// asked for, then the chat commands the grammar answers without a model.
// Every prompt is a chat command answered in the DM, so a click reads
// nothing the person could not ask for by typing.

// assistantTitle is the panel thread's title until the person writes.
const assistantTitle = "Marlowe"

// maxPrompts is Slack's limit on suggested prompts.
const maxPrompts = 4

// assistantHook tells the panel what waits for a person.
type assistantHook struct {
	mu    sync.RWMutex
	hints func(ctx context.Context, userID string) (core.PanelHints, error)
}

// SetPanelHints sets how the assistant panel learns what waits for a
// person (the composition root passes the engine's PanelHints).
func (a *Adapter) SetPanelHints(fn func(ctx context.Context, userID string) (core.PanelHints, error)) {
	a.assist.mu.Lock()
	defer a.assist.mu.Unlock()
	a.assist.hints = fn
}

// assistantStarted answers assistant_thread_started before the event is
// acknowledged, bounded; a failure is logged and never fails the delivery.
func (a *Adapter) assistantStarted(ctx context.Context, e *slackevents.AssistantThreadStartedEvent) {
	th := e.AssistantThread
	if !a.agent.Load() || th.ChannelID == "" || th.ThreadTimeStamp == "" {
		return
	}
	actx, cancel := context.WithTimeout(ctx, homeOpenTimeout)
	defer cancel()
	var hints core.PanelHints
	a.assist.mu.RLock()
	fn := a.assist.hints
	a.assist.mu.RUnlock()
	if fn != nil && isSlackID(th.UserID) {
		h, err := fn(actx, th.UserID)
		if err != nil {
			a.log.Warn("slack: could not read what waits for the person; generic prompts", "user", th.UserID, "error", err)
		}
		hints = h
	}
	err := a.pacer.do(actx, th.ChannelID, core.PriorityNormal, "", func(ctx context.Context) error {
		if err := a.api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{
			ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: assistantTitle,
		}); err != nil {
			return fmt.Errorf("assistant.threads.setTitle: %w", err)
		}
		return a.api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
			ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: "Try asking", Prompts: assistantPrompts(hints),
		})
	})
	if err != nil {
		a.log.Warn("slack: could not set up the assistant thread", "channel", th.ChannelID, "error", err)
	}
}

// assistantPrompts are at most maxPrompts: what the person's context
// holds first, then the commands that help anyone start.
func assistantPrompts(h core.PanelHints) []slack.AssistantThreadsPrompt {
	var ps []slack.AssistantThreadsPrompt
	add := func(title, msg string) {
		if len(ps) < maxPrompts {
			ps = append(ps, slack.AssistantThreadsPrompt{Title: title, Message: msg})
		}
	}
	if h.Decisions > 0 {
		add(fmt.Sprintf("Your inbox: %d waiting for your decision", h.Decisions), "inbox")
	}
	if h.Reports > 0 {
		add("Your routine's report: "+core.Truncate(h.Report, 60), "inbox")
	}
	if h.Asked > 0 {
		add(fmt.Sprintf("Your requests waiting for approval (%d)", h.Asked), "what do you know about me")
	}
	if h.Decisions == 0 && h.Reports == 0 {
		add("Your inbox", "inbox")
	}
	add("What you can do without a model", "help")
	add("Your routines here", "routines")
	add("What I keep about you", "what do you know about me")
	return ps
}
