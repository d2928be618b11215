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
// title and suggested prompts — the chat commands the grammar answers
// without a model, led by the person's inbox when something waits there.

// assistantTitle is the panel thread's title until the person writes.
const assistantTitle = "Marlowe"

// assistantHook tells the panel how many items wait in a person's inbox.
type assistantHook struct {
	mu      sync.RWMutex
	pending func(ctx context.Context, userID string) (int, error)
}

// SetInboxCount sets how the assistant panel learns how many items wait
// in a person's inbox (the composition root passes the engine's Inbox).
func (a *Adapter) SetInboxCount(fn func(ctx context.Context, userID string) (int, error)) {
	a.assist.mu.Lock()
	defer a.assist.mu.Unlock()
	a.assist.pending = fn
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
	pending := 0
	a.assist.mu.RLock()
	fn := a.assist.pending
	a.assist.mu.RUnlock()
	if fn != nil && isSlackID(th.UserID) {
		n, err := fn(actx, th.UserID)
		if err != nil {
			a.log.Warn("slack: could not count the inbox for the assistant panel", "user", th.UserID, "error", err)
		}
		pending = n
	}
	err := a.pacer.do(actx, th.ChannelID, core.PriorityNormal, "", func(ctx context.Context) error {
		if err := a.api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{
			ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: assistantTitle,
		}); err != nil {
			return fmt.Errorf("assistant.threads.setTitle: %w", err)
		}
		return a.api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
			ChannelID: th.ChannelID, ThreadTS: th.ThreadTimeStamp, Title: "Try asking", Prompts: assistantPrompts(pending),
		})
	})
	if err != nil {
		a.log.Warn("slack: could not set up the assistant thread", "channel", th.ChannelID, "error", err)
	}
}

// assistantPrompts are at most four (Slack's limit), the inbox first when
// items wait there.
func assistantPrompts(pending int) []slack.AssistantThreadsPrompt {
	var ps []slack.AssistantThreadsPrompt
	if pending > 0 {
		ps = append(ps, slack.AssistantThreadsPrompt{Title: fmt.Sprintf("Your inbox: %d waiting for you", pending), Message: "inbox"})
	}
	return append(ps,
		slack.AssistantThreadsPrompt{Title: "This channel's routines", Message: "routines"},
		slack.AssistantThreadsPrompt{Title: "What waits for approval", Message: "approvals"},
		slack.AssistantThreadsPrompt{Title: "What you can do without a model", Message: "help"},
	)
}
