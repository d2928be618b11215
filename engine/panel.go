package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// PanelHints says what an assistant panel opened by userID should suggest:
// the decisions waiting for them, their routines' newest report and the
// approvals they asked for that are still pending. Like Inbox it reads
// only the channels holding items (Journal.ItemChannels), so opening the
// panel costs what `inbox` does.
func (e *Engine) PanelHints(ctx context.Context, platform, userID string) (core.PanelHints, error) {
	var h core.PanelHints
	now := e.now()
	// One pass over the item channels: the inbox's, counting on the way
	// the approvals the person asked for.
	items, err := e.inboxOf(ctx, platform, userID, func(ctx context.Context, platform string, fn func(*chanView)) error {
		return e.eachItemChannel(ctx, platform, func(v *chanView) {
			fn(v)
			for _, a := range v.fold.Approvals() {
				if a.Requester == userID && a.Pending() && now.Before(a.ExpiresAt) {
					h.Asked++
				}
			}
		})
	})
	if err != nil {
		return core.PanelHints{}, fmt.Errorf("panel hints of %s: %w", userID, err)
	}
	var newest time.Time
	for _, it := range items {
		if it.Kind != "report" {
			h.Decisions++
			continue
		}
		if h.Reports == 0 || !it.RequestedAt.Before(newest) {
			h.Report, newest = it.Title, it.RequestedAt
		}
		h.Reports++
	}
	return h, nil
}
