package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/marlowe-bot/marlowe/core"
)

// The App Home tab shows a person's inbox (views.publish): on
// app_home_opened and whenever an item of theirs appears or is decided.
// The tab is a read-out; decisions are made on the cards (in the DM or the
// thread), so the tab carries no buttons and nothing it shows can go stale
// in a way that matters.

var _ core.HomeView = (*Adapter)(nil)

// homeHook is what the adapter calls when someone opens the Home tab.
type homeHook struct {
	mu sync.RWMutex
	fn func(ctx context.Context, userID string) error
}

// SetHomeOpened sets what happens when a person opens the App Home tab
// (the composition root passes the engine's PublishHome for Slack).
func (a *Adapter) SetHomeOpened(fn func(ctx context.Context, userID string) error) {
	a.home.mu.Lock()
	defer a.home.mu.Unlock()
	a.home.fn = fn
}

// homeOpenTimeout bounds the publish done before the event is acknowledged.
const homeOpenTimeout = 2 * time.Second

// homeOpened answers app_home_opened on the Home tab. It runs before the
// event is acknowledged, bounded, and never fails the delivery: the tab is
// re-rendered the next time it is opened.
func (a *Adapter) homeOpened(ctx context.Context, e *slackevents.AppHomeOpenedEvent) {
	if e.Tab != "home" || !isSlackID(e.User) {
		return
	}
	a.home.mu.RLock()
	fn := a.home.fn
	a.home.mu.RUnlock()
	if fn == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, homeOpenTimeout)
	defer cancel()
	if err := fn(hctx, e.User); err != nil {
		a.log.Warn("slack: could not publish the App Home tab", "user", e.User, "error", err)
	}
}

// maxHomeItems bounds the tab (Slack allows 100 blocks in a view).
const maxHomeItems = 40

// PublishHome implements core.HomeView with views.publish.
func (a *Adapter) PublishHome(ctx context.Context, userID string, items []core.InboxItem) error {
	if !isSlackID(userID) {
		return errors.New("slack: publish home: not a Slack user id")
	}
	view := slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: homeBlocks(items)}}
	// In views.publish's own queue (Tier 4), apart from every message.
	err := a.pacer.lookup(ctx, "views.publish", func(ctx context.Context) error {
		_, err := a.api.PublishViewContext(ctx, slack.PublishViewContextRequest{UserID: userID, View: view})
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: views.publish: %w", err)
	}
	return nil
}

func homeBlocks(items []core.InboxItem) []slack.Block {
	md := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.MarkdownType, truncateRunes(defang(s), maxSectionText), false, false)
	}
	blocks := []slack.Block{slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, "Your inbox", false, false))}
	if len(items) == 0 {
		return append(blocks, slack.NewSectionBlock(md("📭 Nothing waits for you: no approvals, consent requests, questions or reports."), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", md(fmt.Sprintf("%d waiting, oldest first. Decide on each card, in our DM or in its thread: it is the same decision.", len(items)))))
	for i, it := range items {
		if i == maxHomeItems {
			blocks = append(blocks, slack.NewContextBlock("", md(fmt.Sprintf("…and %d more: send me `inbox` in a DM.", len(items)-i))))
			break
		}
		icon := map[string]string{"approval": "🔐", "consent": "🔑", "question": "❓", "report": "📋"}[it.Kind]
		var b strings.Builder
		fmt.Fprintf(&b, "%s *%s*\nIn <#%s>", icon, it.Title, it.Where.Channel)
		if it.Kind == "report" {
			// A routine's report: read, then dismissed on its DM card.
			fmt.Fprintf(&b, " · filed %s · dismiss it on its card in our DM", it.RequestedAt.UTC().Format("Jan 2 15:04 UTC"))
			blocks = append(blocks, slack.NewDividerBlock(), slack.NewSectionBlock(md(b.String()), nil, nil))
			continue
		}
		if it.Requester != "" {
			fmt.Fprintf(&b, " for <@%s>", it.Requester)
		}
		if it.Consequence != "" && it.Kind != "question" {
			fmt.Fprintf(&b, " · %s", it.Consequence)
		}
		if it.Destination != "" {
			fmt.Fprintf(&b, " → %s", it.Destination)
		}
		fmt.Fprintf(&b, " · decide by %s", it.ExpiresAt.UTC().Format("Jan 2 15:04 UTC"))
		blocks = append(blocks, slack.NewDividerBlock(), slack.NewSectionBlock(md(b.String()), nil, nil))
	}
	return blocks
}
