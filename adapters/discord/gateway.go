package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/lanes"
)

// gatewayQueued is how many gateway items may wait or be in delivery at
// once; beyond it the gateway is not read (back-pressure, never a drop).
const gatewayQueued = 2048

// inbound is one gateway item waiting in its channel's lane.
type inbound struct {
	msg   *discordgo.Message // MESSAGE_CREATE
	click *discordgo.Interaction
}

// Run implements core.Surface: it resolves the bot's identity
// (users/@me), reads the gateway URL from GET gateway/bot, IDENTIFYs with
// Intents and receives until ctx ends. Whenever the socket closes (op 7, a
// resumable op 9, a drop, a missed heartbeat ack) it RESUMEs at the
// resume_gateway_url from READY with the session id and last sequence, and
// Discord replays what was missed; a non-resumable session IDENTIFYs
// afresh. Messages are delivered in gateway order per channel, once. It
// returns when ctx ends and its goroutines are done, or with an error when
// Discord refuses the token or the intents.
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
	// The lanes outlive ctx by the drain: Discord never sends a gateway
	// event again, so what was queued when Run was told to stop is still
	// delivered, until cfg.DrainTimeout (then qctx ends and the rest is
	// dropped, logged).
	qctx, qcancel := context.WithCancel(context.WithoutCancel(ctx))
	queue := lanes.New(gatewayQueued, lanes.Deliveries, func(it inbound) {
		if qctx.Err() == nil && it.msg != nil { // not past the drain
			a.receiveMessage(qctx, it.msg)
		}
	})
	a.running, a.deliver, a.runCtx, a.queue, a.queueCtx, a.stop = true, deliver, ctx, queue, qctx, stop
	a.identified = false
	a.runMu.Unlock()

	defer func() {
		close(stop)
		a.bg.Wait()
		a.drainQueue(queue, qcancel)
		a.runMu.Lock()
		a.running, a.deliver, a.queue = false, nil, nil
		a.runMu.Unlock()
		a.client.CloseIdleConnections()
	}()

	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	id, err := a.refreshIdentity(ictx)
	if err != nil {
		cancel()
		return err
	}
	if err := a.registerCommands(ictx); err != nil {
		// Messages and clicks work without it; /marlowe is not offered.
		a.log.Warn("discord: /marlowe not registered", "err", err)
	}
	gw, err := a.sess.GatewayBot(discordgo.WithContext(ictx))
	cancel()
	if err != nil {
		return fmt.Errorf("discord: GET gateway/bot: %w", err)
	}
	if gw.URL == "" {
		return errors.New("discord: GET gateway/bot returned no url")
	}
	if a.retry.q != nil {
		a.bg.Go(func() { a.retryLoop(ctx, stop) })
	}
	a.log.Info("discord: connecting", "user", id.userID, "name", id.name, "gateway", gw.URL)
	return a.gateway(ctx, gw.URL)
}

func (a *Adapter) noteGuild(g *discordgo.Guild) {
	for _, c := range append(append([]*discordgo.Channel(nil), g.Channels...), g.Threads...) {
		if c != nil {
			if c.GuildID == "" {
				c.GuildID = g.ID
			}
			a.chans.put(c.ID, infoOf(c))
		}
	}
	a.guilds.drop(g.ID) // roles and owner are read afresh when needed
}

// noteRoles learns a guild's managed roles from GUILD_CREATE or
// GUILD_UPDATE (an unavailable guild carries none).
func (a *Adapter) noteRoles(d json.RawMessage) {
	var g struct {
		ID          string     `json:"id"`
		Unavailable bool       `json:"unavailable"`
		Roles       []roleJSON `json:"roles"`
	}
	if err := json.Unmarshal(d, &g); err != nil {
		a.log.Warn("discord: guild roles unreadable", "err", err)
		return
	}
	if g.ID != "" && !g.Unavailable {
		a.roles.setGuild(g.ID, g.Roles)
	}
}

// dispatch handles one DISPATCH on the reading goroutine, in gateway
// order. It only records and enqueues.
func (a *Adapter) dispatch(t string, d json.RawMessage) {
	switch t {
	case "MESSAGE_CREATE":
		var m discordgo.Message
		if err := json.Unmarshal(d, &m); err != nil || m.ID == "" || m.ChannelID == "" {
			a.log.Warn("discord: malformed MESSAGE_CREATE dropped", "err", err)
			return
		}
		applyTitles(&m, d)
		a.enqueueLive(m.ChannelID, inbound{msg: &m})
	case "MESSAGE_UPDATE":
		// Not delivered: an edit never addresses the bot (the filter
		// ignores edits), and its text must not be recorded.
	case "INTERACTION_CREATE":
		var i discordgo.Interaction
		if err := json.Unmarshal(d, &i); err != nil || i.ID == "" {
			a.log.Warn("discord: malformed INTERACTION_CREATE dropped", "err", err)
			return
		}
		// Clicks do not queue behind messages: the 3 s ack is per click.
		a.background(func(ctx context.Context) { a.handleInteraction(ctx, &i, a.respondGateway) })
	case "GUILD_CREATE":
		var g discordgo.Guild
		if json.Unmarshal(d, &g) == nil && g.ID != "" {
			a.noteGuild(&g)
			a.gapGuild(&g) // a new session's gap fill waits for it
		}
		a.noteRoles(d)
	case "GUILD_UPDATE", "GUILD_DELETE", "GUILD_ROLE_CREATE", "GUILD_ROLE_UPDATE", "GUILD_ROLE_DELETE":
		var g struct {
			ID      string   `json:"id"`
			GuildID string   `json:"guild_id"`
			Role    roleJSON `json:"role"`
			RoleID  string   `json:"role_id"`
		}
		if json.Unmarshal(d, &g) == nil {
			a.guilds.drop(g.GuildID)
			a.guilds.drop(g.ID)
		}
		switch t {
		case "GUILD_UPDATE":
			a.noteRoles(d)
		case "GUILD_DELETE":
			a.roles.dropGuild(g.ID)
		case "GUILD_ROLE_CREATE", "GUILD_ROLE_UPDATE":
			a.roles.put(g.GuildID, g.Role)
		case "GUILD_ROLE_DELETE":
			a.roles.drop(g.GuildID, g.RoleID)
		}
	case "CHANNEL_CREATE", "CHANNEL_UPDATE", "THREAD_CREATE", "THREAD_UPDATE":
		var c discordgo.Channel
		if json.Unmarshal(d, &c) == nil {
			a.noteChannel(&c)
		}
	case "CHANNEL_DELETE", "THREAD_DELETE":
		var c struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(d, &c) == nil {
			a.chans.drop(c.ID)
		}
	}
}

func (a *Adapter) noteChannel(c *discordgo.Channel) {
	if c != nil && c.ID != "" {
		a.chans.put(c.ID, infoOf(c))
	}
}

// background runs fn in a goroutine Run waits for, with Run's context.
func (a *Adapter) background(fn func(ctx context.Context)) bool {
	a.runMu.RLock()
	defer a.runMu.RUnlock()
	if !a.running {
		return false
	}
	ctx := a.runCtx
	a.bg.Go(func() { fn(ctx) })
	return true
}

// enqueue hands an item to its channel's lane (so one channel's or
// thread's messages are delivered in gateway order, and a slow delivery
// holds back no other channel). It waits while too many items are queued:
// back-pressure on the gateway, never a drop.
func (a *Adapter) enqueue(channel string, it inbound) {
	a.runMu.RLock()
	queue, qctx := a.queue, a.queueCtx
	a.runMu.RUnlock()
	if queue == nil {
		return
	}
	_ = queue.Add(qctx, channel, it) // fails only when Run ends
}

// drainQueue waits, at most cfg.DrainTimeout, for the lanes to deliver
// what they hold, then ends their context (a lane still waiting drops its
// items) and waits for them.
func (a *Adapter) drainQueue(queue *lanes.Lanes[inbound], cancel context.CancelFunc) {
	if !queue.Drain(a.cfg.DrainTimeout, cancel) {
		a.log.Warn("discord: drain timed out; messages still queued are not delivered", "timeout", a.cfg.DrainTimeout)
	}
}

// receiveMessage normalises one MESSAGE_CREATE and delivers it once.
func (a *Adapter) receiveMessage(ctx context.Context, m *discordgo.Message) {
	if m.Author == nil {
		a.log.Debug("discord: message without an author dropped", "channel", m.ChannelID)
		return
	}
	ev := a.normaliseLive(ctx, m)
	a.noteReceived(m, &ev)
	key, in := "msg:"+m.ID, core.Inbound{Event: &ev}
	if err := a.deliverOnce(ctx, key, in); err != nil && ctx.Err() == nil {
		a.queueRetry(ctx, key, in, err)
	}
}

// deliverOnce hands in to deliver unless key was delivered before (a
// replayed event after RESUME, or another replica's session): the delivery
// contract (internal/delivery). Discord never redelivers a gateway event,
// so the contract's policy here retries a failed deliver a few times and
// delivers unclaimed when the deduper is down; a message that still fails
// goes to the delivery queue (receiveMessage, retry.go).
func (a *Adapter) deliverOnce(ctx context.Context, key string, in core.Inbound) error {
	deliver, err := a.deliverFunc()
	if err != nil {
		return err
	}
	if _, err := a.claims.Deliver(ctx, key, func(ctx context.Context) error { return deliver(ctx, in) }); err != nil {
		return fmt.Errorf("discord: %w", err)
	}
	return nil
}

// deliverAttempt is one try of deliverOnce, for the delivery queue's own
// schedule.
func (a *Adapter) deliverAttempt(ctx context.Context, key string, in core.Inbound) error {
	deliver, err := a.deliverFunc()
	if err != nil {
		return err
	}
	_, err = a.claims.Once(ctx, key, func(ctx context.Context) error { return deliver(ctx, in) })
	return err
}

func (a *Adapter) deliverFunc() (func(context.Context, core.Inbound) error, error) {
	a.runMu.RLock()
	defer a.runMu.RUnlock()
	if a.deliver == nil {
		return nil, errors.New("discord: adapter is not running")
	}
	return a.deliver, nil
}
