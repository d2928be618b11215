// Package intent is the intent-window filter of ARCHITECTURE.md section 5:
// the pure decision whether a person's message is addressed to the bot
// (route) or not (ignore), and the windows that let the bot keep listening to
// a conversation it was drawn into for a bounded time.
//
// # The pieces
//
//   - Decide is pure: it takes the event, the windows the caller fetched for
//     it, and the time, and returns a Decision. It never allocates.
//   - Observe turns one of the bot's own posts into the window updates it
//     causes; Updates.Apply writes them to a WindowStore. PostFromCommand and
//     Rebuild do the same from journaled message.posted commands.
//   - WindowStore is the port that keeps windows: NewMemoryStore (in process)
//     here, the Redis implementation in store/redis. Both pass
//     intent/windowtest.
//   - Filter is what the ingress calls: one store read per event (none when
//     the rules decide without windows), Decide, and per-reason counters.
//     It is also the engine's core.PostObserver (ObservePost), so the bot's
//     own posts open and extend windows.
//   - ReplayScenario runs the shared scenario files (JSONL) through the real
//     Decide and window logic.
//
// # The Event contract (what adapters must deliver)
//
// Decide trusts the adapter's normalisation of core.Event; these fields carry
// meaning:
//
//   - Author.ID is the platform-verified user id. An event without one is not
//     a person's message (rule 1). Author.IsBot is true for every bot,
//     ours included.
//   - Subtype is "" for a plain new message a person wrote, and non-empty for
//     everything else: edits, deletions, joins, topic changes, pins, ... All
//     of those are ignored (rule 1). Adapters MUST normalise platform
//     subtypes that are really a person's new post to "": on Slack that is
//     "file_share" (a message with an attachment) and "thread_broadcast" (a
//     thread reply also sent to the channel); on Discord the "reply" message
//     type; on Telegram a message with a caption. Leaving them set would make
//     the bot deaf to those messages.
//   - Visibility is Public, Private or DM. Anything else (including "") is
//     treated as Private: the filter fails closed.
//   - Scope.Thread is the thread root's message id, "" at top level. A thread
//     root itself is a top-level message (Slack's thread_ts == ts).
//   - MentionsBot is resolved by the adapter from the bot's user id, never by
//     matching a name in Text. Mentions lists the other addressees: users,
//     groups (Slack user groups, Discord roles) and broadcasts (@here,
//     @channel, @everyone). Adapters may list the bot in Mentions too; it
//     does not matter, because rule 3 is checked before rule 4.
//   - ReplyToBot is true when the message is an explicit reply (Telegram,
//     Discord, Slack has none) to a message the bot posted.
//   - Text is never read by Decide and never logged by Filter.
//
// # Windows
//
// Windows are opened and extended only by the bot's own posts. A window is
// open while now < until (strictly). A thread's window is extended, never
// shortened. The channel's top-level window belongs to the person the bot
// most recently answered at top level; answering someone else moves it.
// Window lengths come from the channel's core.Policy.
package intent
