package telegram

import (
	"context"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
)

var _ core.Typing = (*Adapter)(nil)

// typingEvery is how often "typing…" is sent again while a run works:
// Telegram shows a chat action for about 5 s (or until the bot's next
// message).
const typingEvery = 4 * time.Second

// Typing implements core.Typing with sendChatAction action=typing, in the
// scope's forum topic when it has one (message_thread_id). A chat action is
// not a message: it does not wait in the chat's message queue, so it never
// delays an answer; over its own budget it is dropped.
func (a *Adapter) Typing(ctx context.Context, scope core.Scope) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	chat, topic, err := parseChannel(scope.Channel)
	if err != nil {
		return err
	}
	p := params("chat_id", itoa(chat), "action", "typing")
	if topic > 1 {
		p["message_thread_id"] = itoa(topic)
	}
	return a.pacer.decorate(ctx, "sendChatAction", chat, func(ctx context.Context) error {
		return a.rawInto(ctx, "sendChatAction", p, nil)
	})
}

// TypingEvery implements core.Typing.
func (a *Adapter) TypingEvery() time.Duration { return typingEvery }

// botCommand is one entry of setMyCommands.
type botCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// commandScopes are the menus set at start: private chats and groups get
// the same commands (in a group Telegram sends them as /status@bot, which
// normalise reads as "status").
var commandScopes = []string{"all_private_chats", "all_group_chats"}

// menu is the command menu, from the grammar's table (chatcommand.Menu).
func menu() []botCommand {
	var out []botCommand
	for _, m := range chatcommand.Menu() {
		out = append(out, botCommand{Command: m.Name, Description: m.Description})
	}
	return out
}

// setCommands sets the command menu for each scope. Every replica does it
// at start; the call replaces the menu with the same one, so doing it
// again, or from several replicas at once, changes nothing. A failure is
// logged: the bot works without a menu.
func (a *Adapter) setCommands(ctx context.Context) {
	cmds := mustJSON(menu())
	for _, sc := range commandScopes {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := a.callInto(cctx, "setMyCommands", params("commands", cmds, "scope", mustJSON(map[string]string{"type": sc})), nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("telegram: setMyCommands failed; the command menu may be missing or stale", "scope", sc, "err", err)
		}
	}
	a.log.Debug("telegram: command menu set", "scopes", commandScopes, "commands", len(chatcommand.Menu()))
}
