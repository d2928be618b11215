package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Ephemeral = (*Adapter)(nil)

// PostEphemeral implements core.Ephemeral with chat.postEphemeral:
// only userID sees the message, in the channel (and thread) of scope.
// Slack keeps no copy, so there is nothing to deduplicate or look up.
func (a *Adapter) PostEphemeral(ctx context.Context, scope core.Scope, userID, text string) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	if !isSlackID(userID) {
		return errors.New("slack: ephemeral post: not a Slack user id")
	}
	text = defang(text)
	if strings.TrimSpace(text) == "" {
		return errors.New("slack: ephemeral post: empty text")
	}
	if parts := splitText(text, a.cfg.MaxMessageChars); len(parts) > 1 {
		text = parts[0] + "\n…"
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if scope.Thread != "" {
		opts = append(opts, slack.MsgOptionTS(scope.Thread))
	}
	err := a.pacer.do(ctx, scope.Channel, core.PriorityNormal, "", func(ctx context.Context) error {
		_, err := a.api.PostEphemeralContext(ctx, scope.Channel, userID, opts...)
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: chat.postEphemeral: %w", err)
	}
	return nil
}
