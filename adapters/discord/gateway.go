package discord

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// inbound is one gateway item waiting for its shard's worker.
type inbound struct {
	msg   *discordgo.Message // MESSAGE_CREATE
	click *discordgo.Interaction
}

// Run implements core.Surface: it resolves the bot's identity
// (users/@me), opens the gateway session (GET gateway/bot, IDENTIFY with
// Intents) and receives until ctx ends, reopening the socket whenever it
// closes — discordgo RESUMEs at the resume_gateway_url from READY with the
// session id and last sequence, and Discord replays what was missed; a
// non-resumable invalid session IDENTIFYs afresh. Messages are delivered in
// gateway order per channel. It returns when ctx ends and its goroutines
// are done.
func (a *Adapter) Run(ctx context.Context, deliver func(context.Context, core.Inbound) error) error {
	if deliver == nil {
		return errors.New("discord: Run needs a deliver func")
	}
	a.runMu.Lock()
	if a.running {
		a.runMu.Unlock()
		return errors.New("discord: Run is already active")
	}
	stop := make(chan struct{})
	queues := make([]chan inbound, a.shards)
	for i := range queues {
		queues[i] = make(chan inbound, 256)
	}
	a.running, a.deliver, a.runCtx, a.queues, a.stop = true, deliver, ctx, queues, stop
	a.runMu.Unlock()

	defer func() {
		_ = a.sess.Close() // a no-op when the socket is already closed
		close(stop)
		a.runMu.Lock()
		a.running, a.deliver, a.queues = false, nil, nil
		a.runMu.Unlock()
		a.bg.Wait()
		a.client.CloseIdleConnections()
	}()

	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	id, err := a.refreshIdentity(ictx)
	cancel()
	if err != nil {
		return err
	}
	for i, q := range queues {
		a.bg.Go(func() { a.work(ctx, i, q, stop) })
	}
	a.drainWake()
	if err := a.sess.Open(); err != nil {
		return fmt.Errorf("discord: open gateway: %w", err)
	}
	a.log.Info("discord: connected as bot user", "user", id.userID, "name", id.name)
	a.supervise(ctx)
	return nil
}

// supervise reopens the gateway socket after each close until ctx ends.
// discordgo's Open resumes when it holds a session id and sequence (after
// op 7, a dropped socket or a resumable op 9) and identifies otherwise.
func (a *Adapter) supervise(ctx context.Context) {
	backoff := 250 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		for {
			if ctx.Err() != nil {
				return
			}
			err := a.sess.Open()
			if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
				backoff = 250 * time.Millisecond
				break
			}
			a.log.Warn("discord: gateway reconnect failed; retrying", "err", err, "in", backoff)
			if sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(backoff*2, time.Minute)
		}
	}
}

func (a *Adapter) drainWake() {
	select {
	case <-a.wake:
	default:
	}
}

// addHandlers registers the gateway handlers. With SyncEvents they run on
// discordgo's reading goroutine, in gateway order; they only record and
// enqueue.
func (a *Adapter) addHandlers() {
	s := a.sess
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
		if r.User != nil {
			a.setIdentity(r.User)
		}
		a.log.Info("discord: session ready", "session", r.SessionID, "guilds", len(r.Guilds))
	})
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Resumed) {
		a.log.Info("discord: session resumed")
		a.background(func(ctx context.Context) {
			ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if _, err := a.refreshIdentity(ictx); err != nil && ctx.Err() == nil {
				a.log.Warn("discord: identity refresh after resume failed", "err", err)
			}
		})
	})
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	})
	s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) {
		if g.Guild == nil {
			return
		}
		for _, c := range append(append([]*discordgo.Channel(nil), g.Channels...), g.Threads...) {
			if c != nil {
				if c.GuildID == "" {
					c.GuildID = g.ID
				}
				a.chans.put(c.ID, infoOf(c))
			}
		}
		a.guilds.drop(g.ID) // roles and owner are read afresh when needed
	})
	s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildUpdate) {
		if g.Guild != nil {
			a.guilds.drop(g.ID)
		}
	})
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.GuildRoleUpdate) {
		if r.GuildRole != nil {
			a.guilds.drop(r.GuildID)
		}
	})
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.GuildRoleDelete) { a.guilds.drop(r.GuildID) })
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ChannelCreate) { a.noteChannel(c.Channel) })
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ChannelUpdate) { a.noteChannel(c.Channel) })
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ChannelDelete) {
		if c.Channel != nil {
			a.chans.drop(c.ID)
		}
	})
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadCreate) { a.noteChannel(c.Channel) })
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadUpdate) { a.noteChannel(c.Channel) })
	s.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadDelete) {
		if c.Channel != nil {
			a.chans.drop(c.ID)
		}
	})
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if m.Message != nil && m.ID != "" && m.ChannelID != "" {
			a.enqueue(m.ChannelID, inbound{msg: m.Message})
		}
	})
	// MESSAGE_UPDATE is not delivered: an edit never addresses the bot
	// (the filter ignores edits), and its text must not be recorded.
	s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) {
		if i.Interaction == nil {
			return
		}
		it := i.Interaction
		// Clicks do not queue behind messages: the 3 s ack is per click.
		a.background(func(ctx context.Context) { a.handleInteraction(ctx, it, a.respondGateway) })
	})
}

func (a *Adapter) noteChannel(c *discordgo.Channel) {
	if c != nil && c.ID != "" {
		a.chans.put(c.ID, infoOf(c))
	}
}

// background runs fn in a goroutine Run waits for, with Run's context.
func (a *Adapter) background(fn func(ctx context.Context)) {
	a.runMu.RLock()
	defer a.runMu.RUnlock()
	if !a.running {
		return
	}
	ctx := a.runCtx
	a.bg.Go(func() { fn(ctx) })
}

// enqueue hands an item to the shard of its channel (so one channel's or
// thread's messages are delivered in gateway order). It waits when the
// shard is full: back-pressure on the gateway, never a drop.
func (a *Adapter) enqueue(channel string, it inbound) {
	a.runMu.RLock()
	queues, stop := a.queues, a.stop
	a.runMu.RUnlock()
	if len(queues) == 0 {
		return
	}
	h := fnv.New32a()
	h.Write([]byte(channel))
	select {
	case queues[int(h.Sum32())%len(queues)] <- it:
	case <-stop:
	}
}

// work delivers one shard's items in order until stop.
func (a *Adapter) work(ctx context.Context, _ int, q chan inbound, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case it := <-q:
			if it.msg != nil {
				a.receiveMessage(ctx, it.msg)
			}
		}
	}
}

// receiveMessage normalises one MESSAGE_CREATE and delivers it once.
func (a *Adapter) receiveMessage(ctx context.Context, m *discordgo.Message) {
	if m.Author == nil {
		a.log.Debug("discord: message without an author dropped", "channel", m.ChannelID)
		return
	}
	ev := a.normaliseLive(ctx, m)
	if err := a.deliverOnce(ctx, "msg:"+m.ID, core.Inbound{Event: &ev}); err != nil && ctx.Err() == nil {
		a.log.Warn("discord: message not delivered", "channel", ev.Scope.Channel, "message", m.ID, "err", err)
	}
}

// deliverOnce hands in to deliver unless key was delivered before (a
// replayed event after RESUME, or another replica's session). Discord never
// redelivers a gateway event, so a failed deliver is retried here a few
// times before it is given up (and logged).
func (a *Adapter) deliverOnce(ctx context.Context, key string, in core.Inbound) error {
	a.runMu.RLock()
	deliver := a.deliver
	a.runMu.RUnlock()
	if deliver == nil {
		return errors.New("discord: adapter is not running")
	}
	var last error
	for attempt := 1; attempt <= 3; attempt++ {
		token, done, err := a.dedupe.Claim(ctx, key, a.cfg.ClaimTTL)
		switch {
		case err != nil:
			// Without the dedupe store a duplicate is possible; the engine
			// also drops a message id it has journaled.
			a.log.Warn("discord: dedupe claim failed; delivering anyway", "err", err)
		case done:
			a.log.Debug("discord: duplicate delivery dropped", "key", key)
			return nil
		case token == "":
			a.log.Debug("discord: delivery in flight elsewhere", "key", key)
			return nil
		}
		last = deliver(ctx, in)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if token != "" {
			if last == nil {
				if cerr := a.dedupe.Commit(sctx, key, token, a.cfg.DedupeTTL); cerr != nil {
					a.log.Warn("discord: dedupe commit failed", "err", cerr)
				}
			} else {
				_ = a.dedupe.Release(sctx, key, token)
			}
		}
		cancel()
		if last == nil {
			return nil
		}
		if sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			break
		}
	}
	return fmt.Errorf("discord: deliver: %w", last)
}
