package engine

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// conversationOf decides which conversation a routed message joins, from
// the channel's fold (under its lock); ingress records the answer on the
// message.received, so the journal, not this process, is where it lives.
// thread is where the run answers (threadOf). First match:
//
//   - the thread's live run: the message steers it, in its conversation;
//   - a DM is one conversation;
//   - a reply to a message the fold knows (Telegram reply_to_message,
//     Discord message_reference) continues that message's conversation;
//   - a message in a thread joins the thread's conversation;
//   - a top-level follow-up from the person the top-level window is for
//     continues the exchange that opened the window: routed by the window,
//     or a mention while the window is open (Telegram's privacy mode lets
//     only mentions through);
//   - anything else (a new top-level mention with no window open) starts a
//     conversation of its own, keyed by its thread.
//
// topWindow is the channel's top-level window length, now the time.
func conversationOf(f *fold.Channel, live *fold.Run, ev *core.Event, reason, thread string, topWindow time.Duration, now time.Time) string {
	if live != nil && live.Conversation != "" {
		return live.Conversation
	}
	if ev.Visibility == core.DM {
		return core.ConversationDM
	}
	if ev.ReplyTo != "" {
		if conv, ok := f.ConversationOfMessage(ev.ReplyTo); ok {
			return conv
		}
	}
	if ev.Scope.Thread != "" {
		return f.ConversationOfThread(ev.Scope.Thread)
	}
	if user, conv, at, ok := f.ToplevelExchange(); ok && user == ev.Author.ID &&
		(reason == core.RouteToplevelWindow || ev.MentionsBot && now.Before(at.Add(topWindow))) {
		return conv
	}
	return thread
}
