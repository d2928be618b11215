package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Permalinker = (*Adapter)(nil)

// Permalink implements core.Permalinker with t.me/c links, which open for
// the chat's members: supergroups and forum topics only (a basic group or
// a private chat has no message links; `status` then shows the message id).
func (a *Adapter) Permalink(_ context.Context, ref core.MessageRef) (string, error) {
	chat, topic, err := parseChannel(ref.Scope.Channel)
	if err != nil {
		return "", err
	}
	msg := ref.ID
	if msg == "" {
		msg = ref.Scope.Thread
	}
	if _, err := strconv.ParseInt(msg, 10, 64); err != nil {
		return "", fmt.Errorf("telegram: permalink: %q is not a message id", msg)
	}
	internal, ok := strings.CutPrefix(strconv.FormatInt(chat, 10), "-100")
	if !ok {
		return "", fmt.Errorf("telegram: permalink: chat %d is not a supergroup (no message links)", chat)
	}
	if topic > 1 {
		return "https://t.me/c/" + internal + "/" + strconv.FormatInt(topic, 10) + "/" + msg, nil
	}
	return "https://t.me/c/" + internal + "/" + msg, nil
}
