package engine

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

// InboxOfEveryChannel is Inbox folded over every channel of the platform
// (what Inbox did before the item index): the reference it must equal.
func (e *Engine) InboxOfEveryChannel(ctx context.Context, platform, userID string) ([]core.InboxItem, error) {
	return e.inboxOf(ctx, platform, userID, e.eachChannel)
}

// GrantIDs lists person's standing grants on platform, from the item
// channels (index) or every channel.
func (e *Engine) GrantIDs(ctx context.Context, platform, person string, everyChannel bool) ([]string, error) {
	each := e.eachItemChannel
	if everyChannel {
		each = e.eachChannel
	}
	rows, err := e.grantsIn(ctx, platform, person, each)
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = string(r.ch) + "/" + r.g.ID
	}
	return out, err
}

// Owns reports whether this replica's books hold ch's lease.
func (e *Engine) Owns(ch core.ChannelKey) (*core.Fence, bool) { return e.owns(ch) }
