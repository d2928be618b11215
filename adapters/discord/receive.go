package discord

import (
	"context"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// normaliseLive places m (channel, thread, visibility), resolves whether it
// replies to the bot, and normalises it.
func (a *Adapter) normaliseLive(ctx context.Context, m *discordgo.Message) core.Event {
	self := a.identity()
	w := a.locate(ctx, m.GuildID, m.ChannelID)
	if len(m.MentionRoles) > 0 {
		w.botRoles = a.botRolesOf(ctx, w.scope.Workspace)
	}
	replyToBot := false
	if ref := m.MessageReference; ref != nil && ref.MessageID != "" {
		switch {
		case m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil:
			replyToBot = self.userID != "" && m.ReferencedMessage.Author.ID == self.userID
		default:
			replyToBot = a.ledger.isOurs(ref.MessageID)
		}
	}
	ev := normalise(m, w, self, replyToBot)
	a.checkLookalikes(m, self)
	if ev.MentionsBot && ev.Scope.Thread == "" && ev.Visibility != core.DM {
		// The thread the bot opens on this message is named after it.
		a.hints.put(m.ID, threadName(ev.Text))
	}
	return ev
}

// locate maps a channel id to the scope and visibility of the mapping: a
// DM (channel type 1) is a DM; a thread is a thread of its parent; a guild
// channel is a channel, private when @everyone cannot view it. A channel
// that cannot be looked up is treated as private (the stricter reading).
//
// A message without guild_id is a DM only when its channel is one (type
// 1): REST-shaped and pre-2018 gateway messages in guild channels carry no
// guild_id either, and reading them as DMs would answer every line of a
// public channel. Such a channel's guild comes from the channel.
func (a *Adapter) locate(ctx context.Context, guild, channel string) where {
	w := where{scope: core.Scope{Platform: Platform, Workspace: guild, Channel: channel}}
	c, ok := a.channel(ctx, channel)
	if !ok {
		w.vis = core.Private
		return w
	}
	if guild == "" {
		if c.typ == discordgo.ChannelTypeDM || c.guild == "" {
			w.vis = visibilityOf(c, nil) // a DM, or a group DM (private)
			return w
		}
		w.scope.Workspace = c.guild
	}
	if isThread(c.typ) && c.parent != "" {
		w.scope.Channel, w.scope.Thread = c.parent, channel
		var parent *chanInfo
		if p, ok := a.channel(ctx, c.parent); ok {
			parent = &p
		}
		w.vis = visibilityOf(c, parent)
		return w
	}
	w.vis = visibilityOf(c, nil)
	return w
}

// channel returns what is known of a channel, asking GET channels/{id}
// once when the gateway has not told.
func (a *Adapter) channel(ctx context.Context, id string) (chanInfo, bool) {
	if c, ok := a.chans.get(id); ok {
		return c, true
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := a.sess.Channel(id, discordgo.WithContext(lctx))
	if err != nil || c == nil {
		a.log.Debug("discord: channel lookup failed", "channel", id, "err", err)
		return chanInfo{}, false
	}
	ci := infoOf(c)
	a.chans.put(id, ci)
	return ci, true
}

// checkLookalikes warns once per account when a message mentions another
// user whose name matches the bot's: people may be addressing the wrong
// account, and the bot answers only mentions of its own id.
func (a *Adapter) checkLookalikes(m *discordgo.Message, self identity) {
	names := map[string]bool{}
	for _, n := range []string{self.handle, self.name} {
		if n := normName(n); n != "" {
			names[n] = true
		}
	}
	if len(names) == 0 {
		return
	}
	for _, u := range m.Mentions {
		if u == nil || u.ID == self.userID {
			continue
		}
		if names[normName(u.Username)] || names[normName(u.GlobalName)] {
			if a.seen.first(u.ID) {
				a.log.Warn("discord: another account has the bot's name; mentions of it do not reach the bot",
					"user", u.ID, "name", u.Username, "bot_user", self.userID)
			}
		}
	}
}

// clickOf turns a component interaction into a card click. custom_id is
// the card action's signed token (see renderCard); the engine verifies it.
func clickOf(i *discordgo.Interaction) (core.CardClick, bool) {
	if i.Type != discordgo.InteractionMessageComponent {
		return core.CardClick{}, false
	}
	data := i.MessageComponentData()
	if data.ComponentType != discordgo.ButtonComponent {
		// Cards have buttons only: a select menu's choice is not a
		// card action.
		return core.CardClick{}, false
	}
	var by *discordgo.User
	var mem *discordgo.Member
	switch {
	case i.Member != nil && i.Member.User != nil:
		by, mem = i.Member.User, i.Member
	case i.User != nil:
		by = i.User
	}
	if by == nil || data.CustomID == "" || i.ChannelID == "" {
		return core.CardClick{}, false
	}
	click := core.CardClick{
		Scope:  core.Scope{Platform: Platform, Workspace: i.GuildID, Channel: i.ChannelID},
		Token:  data.CustomID,
		Action: actionOfToken(data.CustomID),
		Card:   cardOfToken(data.CustomID),
		By:     core.Person{ID: by.ID, Name: displayName(by, mem)},
		At:     snowflakeTime(i.ID),
	}
	return click, true
}

// cardOfToken and actionOfToken read the unverified parts of a card token
// ("<approval id>.<action><mac>") for logs and the click's Card field.
func cardOfToken(tok string) string {
	if i := strings.LastIndexByte(tok, '.'); i > 0 {
		return tok[:i]
	}
	return ""
}

func actionOfToken(tok string) string {
	if i := strings.LastIndexByte(tok, '.'); i > 0 && i+1 < len(tok) {
		return tok[i+1 : i+2]
	}
	return ""
}

// respond sends an interaction's initial response.
type respond func(ctx context.Context, i *discordgo.Interaction, r *discordgo.InteractionResponse) error

func (a *Adapter) respondGateway(ctx context.Context, i *discordgo.Interaction, r *discordgo.InteractionResponse) error {
	return a.sess.InteractionRespond(i, r, discordgo.WithContext(ctx))
}

// handleInteraction delivers a button click and acknowledges it within
// Discord's 3 s: type 6 (deferred update: the engine edits the card in
// place once it has decided) when deliver returned or the ack timeout
// passed, or an ephemeral note when the click could not be taken. /marlowe
// goes to handleSlash; other interaction types are answered with an
// ephemeral note.
func (a *Adapter) handleInteraction(ctx context.Context, i *discordgo.Interaction, send respond) {
	if isSlash(i) {
		a.handleSlash(ctx, i, send) // slash.go
		return
	}
	click, ok := clickOf(i)
	if !ok {
		if i.Type == discordgo.InteractionApplicationCommand || i.Type == discordgo.InteractionMessageComponent {
			_ = send(ctx, i, ephemeral("I can't act on that here."))
		}
		return
	}
	// Locate the click like a message: in a thread, the card's scope is the
	// thread of its parent.
	w := a.locate(ctx, i.GuildID, i.ChannelID)
	click.Scope = w.scope
	ref := clickRef{i: discordgo.Interaction{ID: i.ID, AppID: i.AppID, Token: i.Token, Type: i.Type}, acked: make(chan struct{})}
	a.clicksBy.put(clickKey(click.Scope, click.By.ID), ref)
	defer close(ref.acked) // once answered (or not: a follow-up then fails as before)
	done := make(chan error, 1)
	a.background(func(ctx context.Context) {
		// A click's key is its interaction id: a person pressing again is a
		// new interaction, which the engine refuses visibly ("already
		// decided"); a replayed INTERACTION_CREATE is dropped.
		done <- a.deliverOnce(ctx, "click:"+i.ID, core.Inbound{Click: &click})
	})
	timer := time.NewTimer(a.cfg.AckTimeout)
	defer timer.Stop()
	var resp *discordgo.InteractionResponse
	select {
	case err := <-done:
		if err != nil {
			a.log.Warn("discord: click not delivered", "channel", click.Scope.Channel, "err", err)
			resp = ephemeral("⚠️ That click could not be recorded, so nothing was done. Please try again.")
		}
	case <-timer.C:
		a.log.Warn("discord: click still being recorded at the ack deadline; acknowledged", "channel", click.Scope.Channel)
	case <-ctx.Done():
		return
	}
	if resp == nil {
		resp = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := send(rctx, i, resp); err != nil {
		// Another replica's session may have got the same click and
		// answered first; one answer is all Discord takes.
		a.ackStands(err, click.Scope.Channel)
	}
}

func ephemeral(text string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: safeMentions()},
	}
}
