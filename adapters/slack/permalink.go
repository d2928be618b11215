package slack

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Permalinker = (*Adapter)(nil)

// Permalink implements core.Permalinker with chat.getPermalink: `status`
// and `approvals` link each thread they list. It reads, so it is paced
// apart from the channel's posts, in chat.getPermalink's own queue.
func (a *Adapter) Permalink(ctx context.Context, ref core.MessageRef) (string, error) {
	if ref.Scope.Channel == "" || ref.ID == "" {
		return "", errors.New("slack: permalink needs a channel and a ts")
	}
	var link string
	err := a.pacer.lookup(ctx, "chat.getPermalink", func(ctx context.Context) error {
		var err error
		link, err = a.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: ref.Scope.Channel, Ts: ref.ID})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("slack: chat.getPermalink: %w", err)
	}
	return link, nil
}
