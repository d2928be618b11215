package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// outPart is one sendMessage worth of an Outbound.
type outPart struct {
	text     string
	keyboard *inlineKeyboard
}

// render turns an Outbound into messages: a card is one message with an
// inline keyboard; plain text is split at 4,096 UTF-16 units. Text is sent
// without parse_mode, so nothing the model writes can break the request
// (an unbalanced "*" is a 400 with Markdown) and code blocks stay literal;
// the splitter closes and reopens ``` fences across parts.
//
// A resumed post (out.Resumed) leaves room in each part for ResentMarker.
func render(out core.Outbound) ([]outPart, error) {
	if out.Card != nil {
		text, kb, err := renderCard(out.Card, out.Text)
		if err != nil {
			return nil, err
		}
		return []outPart{{text: text, keyboard: kb}}, nil
	}
	if strings.TrimSpace(out.Text) == "" {
		return nil, errors.New("telegram: nothing to post (empty text and no card)")
	}
	limit := MaxMessageChars
	if out.Resumed {
		limit -= len(resentSuffix)
	}
	var parts []outPart
	for _, t := range splitText(out.Text, limit) {
		parts = append(parts, outPart{text: t})
	}
	return parts, nil
}

// ResentMarker ends a message the bot sends again after a restart without
// knowing whether the first send landed (see Post).
const ResentMarker = "(resent after a restart)"

const resentSuffix = "\n\n" + ResentMarker

// marked adds ResentMarker to a part's text, on a line of its own.
func marked(text string) string { return text + resentSuffix }

// Post implements core.Surface. The message goes to the scope's chat and,
// for a forum topic, carries its message_thread_id (never 1, the General
// topic, which is the chat itself). out.Scope.Thread, when set, is the
// message being answered: every part is sent as a reply to it. A key
// already posted by this process returns the recorded ref without posting.
// A send whose response is lost is not retried here. The engine journals
// every post's intent (its step, and so its key) before asking for it and
// message.posted after, so a post whose outcome is unknown is asked for
// again with out.Resumed (a resumed run, after a crash or a failed drive).
// The Bot API cannot read a chat's history or find a message by a key.
// Without a record of attempts (Post, not PostAttempted) every part of a
// resumed post this process has no record of is sent with ResentMarker: it
// may be the second copy, and says so, rather than leaving a gap.
func (a *Adapter) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	return a.post(ctx, out, nil)
}

// PostAttempted implements core.AttemptedPoster, which the engine uses: each
// part's send attempt is journaled (att.Record) in the pacer's slot,
// immediately before sendMessage, and a part of a resumed post carries
// ResentMarker only when an earlier attempt of it was recorded (it may have
// landed). A part never attempted (the process died before its turn in the
// queue, or before the post was asked for) is sent plain: it never left.
func (a *Adapter) PostAttempted(ctx context.Context, out core.Outbound, att core.PostAttempts) (core.MessageRef, error) {
	return a.post(ctx, out, att)
}

// post is Post, with att (nil: no record of attempts) deciding the marker.
func (a *Adapter) post(ctx context.Context, out core.Outbound, att core.PostAttempts) (core.MessageRef, error) {
	if err := checkScope(out.Scope); err != nil {
		return core.MessageRef{}, err
	}
	chat, topic, err := parseChannel(out.Scope.Channel)
	if err != nil {
		return core.MessageRef{}, err
	}
	var replyTo int64
	if out.Scope.Thread != "" {
		if replyTo, err = strconv.ParseInt(out.Scope.Thread, 10, 64); err != nil {
			return core.MessageRef{}, fmt.Errorf("telegram: reply target %q is not a message id", out.Scope.Thread)
		}
	}
	parts, err := render(out)
	if err != nil {
		return core.MessageRef{}, err
	}
	if out.Key != "" {
		unlock := a.ledger.lock(out.Key)
		defer unlock()
	}
	scope := out.Scope
	scope.Platform = Platform
	return a.ledger.posts.PostParts("telegram", out.Key, len(parts), func(i int, partKey string) (core.MessageRef, error) {
		part := parts[i]
		// Not in the ledger (PostParts skips the parts it holds): an
		// earlier process may have sent it.
		if out.Resumed && out.Key != "" && (att == nil || att.Made(ctx, partKey)) {
			if part.keyboard == nil {
				part.text = marked(part.text)
			} else {
				part.text = ResentMarker + "\n" + part.text
			}
		}
		p := params("chat_id", itoa(chat), "text", part.text)
		if topic > 1 {
			p["message_thread_id"] = itoa(topic)
		}
		if replyTo != 0 {
			p["reply_parameters"] = mustJSON(replyParameters{MessageID: replyTo, AllowSendingWithoutReply: true})
		}
		if part.keyboard != nil {
			p["reply_markup"] = mustJSON(part.keyboard)
		}
		recorded := att == nil || partKey == ""
		var sent sentMessage
		err := a.pacer.do(ctx, "sendMessage", chat, out.Priority, "", func(ctx context.Context) error {
			if !recorded {
				// In the queue's slot, so a post still waiting for its
				// turn when the process dies has no attempt on record.
				if err := att.Record(ctx, partKey); err != nil {
					return err
				}
				recorded = true
			}
			return a.rawInto(ctx, "sendMessage", p, &sent)
		})
		if err != nil {
			a.noteMigration(err, chat)
			return core.MessageRef{}, err
		}
		return core.MessageRef{Scope: scope, ID: itoa(sent.MessageID), At: unixOr(sent.Date, a.now())}, nil
	})
}

// noteMigration logs a group that became a supergroup: it has a new chat id
// (a new channel key); Telegram refuses sends to the old one.
func (a *Adapter) noteMigration(err error, chat int64) {
	var ae *APIError
	if errors.As(err, &ae) && ae.MigrateTo != 0 {
		a.log.Warn("telegram: group was upgraded to a supergroup; it continues as a new channel", "old_chat", chat, "new_chat", ae.MigrateTo)
	}
}

// Update implements core.Surface with editMessageText. Checklist edits
// (PriorityEdit) of one message that are still queued are coalesced. A card
// with Resolution set loses its keyboard. Telegram's "message is not
// modified" counts as success.
func (a *Adapter) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	channel := ref.Scope.Channel
	if channel == "" {
		channel = out.Scope.Channel
	}
	if channel == "" || ref.ID == "" {
		return errors.New("telegram: update needs the message's channel and id")
	}
	chat, _, err := parseChannel(channel)
	if err != nil {
		return err
	}
	p := params("chat_id", itoa(chat), "message_id", ref.ID)
	if out.Card != nil {
		text, kb, err := renderCard(out.Card, out.Text)
		if err != nil {
			return err
		}
		p["text"] = text
		if kb == nil {
			kb = &inlineKeyboard{InlineKeyboard: [][]inlineButton{}} // removes the buttons
		}
		p["reply_markup"] = mustJSON(kb)
	} else {
		if strings.TrimSpace(out.Text) == "" {
			return errors.New("telegram: nothing to update to (empty text and no card)")
		}
		text := out.Text
		if parts := splitText(text, MaxMessageChars-2); len(parts) > 1 {
			text = parts[0] + "\n…"
		}
		p["text"] = text
	}
	coalesce := ""
	if out.Priority == core.PriorityEdit {
		coalesce = ref.ID
	}
	err = a.pacer.do(ctx, "editMessageText", chat, out.Priority, coalesce, func(ctx context.Context) error {
		return a.rawInto(ctx, "editMessageText", p, nil)
	})
	if err != nil && !isNotModified(err) {
		return err
	}
	return nil
}

// reactionEmoji maps the names the engine uses to emoji Telegram accepts
// as reactions (a fixed set: ✅ is not among them).
var reactionEmoji = map[string]string{
	"eyes": "👀", "white_check_mark": "👍", "heavy_check_mark": "👍", "thumbsup": "👍", "+1": "👍",
	"x": "👎", "warning": "🤔", "hourglass": "🤔", "hourglass_flowing_sand": "🤔", "tada": "🎉", "ok_hand": "👌",
}

// React implements core.Surface with setMessageReaction (Bot API 7.0,
// sent with this package's own structs). Names such as "eyes" or ":eyes:"
// are mapped to emoji; an emoji is sent as given.
func (a *Adapter) React(ctx context.Context, ref core.MessageRef, emoji string) error {
	if ref.Scope.Channel == "" || ref.ID == "" || emoji == "" {
		return errors.New("telegram: react needs a channel, a message id and an emoji")
	}
	chat, _, err := parseChannel(ref.Scope.Channel)
	if err != nil {
		return err
	}
	e := emoji
	if m, ok := reactionEmoji[strings.Trim(emoji, ":")]; ok {
		e = m
	}
	p := params("chat_id", itoa(chat), "message_id", ref.ID,
		"reaction", mustJSON([]reactionType{{Type: "emoji", Emoji: e}}))
	// A decoration: never queued with the messages, dropped when the
	// chat's reaction budget is spent.
	return a.pacer.decorate(ctx, "setMessageReaction", chat, func(ctx context.Context) error {
		return a.rawInto(ctx, "setMessageReaction", p, nil)
	})
}

// OpenDM implements core.Surface. A private chat's id is the user's id; the
// bot can only write to people who have started it (otherwise sends fail
// with 403).
func (a *Adapter) OpenDM(_ context.Context, userID string) (core.Scope, error) {
	id, err := strconv.ParseInt(userID, 10, 64)
	if err != nil || id <= 0 {
		return core.Scope{}, fmt.Errorf("telegram: open DM: %q is not a user id", userID)
	}
	return core.Scope{Platform: Platform, Channel: userID}, nil
}

// History implements core.Surface. The Bot API cannot read earlier
// messages, and keeping the ones the filter ignored would break its
// promise that they leave no trace, so there is none: context comes from
// what the engine journaled.
func (a *Adapter) History(_ context.Context, thread core.Scope, _ int) ([]core.Event, error) {
	if err := checkScope(thread); err != nil {
		return nil, err
	}
	return nil, nil
}

// sleep waits d, or until ctx ends (returning its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func unixOr(sec int64, fallback time.Time) time.Time {
	if sec > 0 {
		return time.Unix(sec, 0).UTC()
	}
	return fallback
}
