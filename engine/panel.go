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
	items, err := e.Inbox(ctx, platform, userID)
	if err != nil {
		return h, err
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
	now := e.now()
	err = e.eachItemChannel(ctx, platform, func(v *chanView) {
		for _, a := range v.fold.Approvals() {
			if a.Requester == userID && a.Pending() && now.Before(a.ExpiresAt) {
				h.Asked++
			}
		}
	})
	if err != nil {
		return h, fmt.Errorf("panel hints of %s: %w", userID, err)
	}
	return h, nil
}
