package discord

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
)

var _ core.Typing = (*Adapter)(nil)

// typingEvery is how often "is typing…" is triggered again while a run
// works: Discord shows it for about 10 s (or until the bot's next message).
const typingEvery = 8 * time.Second

// Typing implements core.Typing (POST channels/{id}/typing) in the scope's
// thread channel when the thread exists, else in the channel (a run whose
// thread starts with its first post). It is not paced with the messages,
// so it never delays an answer: it goes at once on the channel's
// decoration budget or is dropped, as it is when the route's bucket in
// discordgo is spent (it never sleeps there).
func (a *Adapter) Typing(ctx context.Context, scope core.Scope) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	channel := scope.Channel
	if scope.Thread != "" {
		ok, err := a.threadExists(ctx, scope.Thread)
		if err != nil {
			return err
		}
		if ok {
			channel = scope.Thread
		}
	}
	return a.pacer.decorate(ctx, "typing", channel, func(ctx context.Context) error {
		if a.bucketSpent(discordgo.EndpointChannelTyping(channel)) {
			return pq.ErrDropped
		}
		return a.sess.ChannelTyping(channel, discordgo.WithContext(ctx))
	})
}

// TypingEvery implements core.Typing.
func (a *Adapter) TypingEvery() time.Duration { return typingEvery }
