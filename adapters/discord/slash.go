package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// The /marlowe application command. Its uses reach the engine as the
// messages people would type: `/marlowe ask <task>` is a message addressed
// to the bot, `inbox`, `routines` and `status` are those chat commands. Each
// is answered through its interaction: a deferred response (type 5) at
// once, then the run's answer as the edit of that response
// (PATCH webhooks/{app}/{token}/messages/@original), which is idempotent, so
// an answer re-posted after a crash is still one message.

// CommandName is the application command's name.
const CommandName = "marlowe"

// Subcommands of /marlowe.
const (
	SubAsk      = "ask"
	SubInbox    = "inbox"
	SubRoutines = "routines"
	SubStatus   = "status"
)

// maxTask bounds the ask option (Discord allows 6,000 characters).
const maxTask = 4000

// commandSpec is the /marlowe command as registered: usable in guilds and
// in the bot's DMs, by a guild-installed app.
func commandSpec() *discordgo.ApplicationCommand {
	minLen := 1
	contexts := []discordgo.InteractionContextType{discordgo.InteractionContextGuild, discordgo.InteractionContextBotDM}
	install := []discordgo.ApplicationIntegrationType{discordgo.ApplicationIntegrationGuildInstall}
	sub := func(name, desc string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: desc, Options: opts}
	}
	return &discordgo.ApplicationCommand{
		Name: CommandName, Description: "Ask Marlowe, or see what waits for you",
		Type: discordgo.ChatApplicationCommand, Contexts: &contexts, IntegrationTypes: &install,
		Options: []*discordgo.ApplicationCommandOption{
			sub(SubAsk, "Ask Marlowe to do something here", &discordgo.ApplicationCommandOption{
				Type: discordgo.ApplicationCommandOptionString, Name: "task", Description: "What to do",
				Required: true, MinLength: &minLen, MaxLength: maxTask,
			}),
			sub(SubInbox, "What waits for your decision (only you see the answer)"),
			sub(SubRoutines, "This channel's routines"),
			sub(SubStatus, "What is running here"),
		},
	}
}

// registerCommands overwrites the application's global commands with
// /marlowe (PUT applications/{app}/commands: the same list twice is the
// same state, so every start may do it). Global rather than per guild: one
// call covers every guild the bot is in and its DMs, and a guild joined
// later needs nothing.
func (a *Adapter) registerCommands(ctx context.Context) error {
	body, err := a.sess.RequestWithBucketID(http.MethodGet, discordgo.EndpointApplication("@me"), nil, discordgo.EndpointApplication(""), discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: register commands: applications/@me: %w", err)
	}
	var app struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &app); err != nil || app.ID == "" {
		return fmt.Errorf("discord: register commands: applications/@me has no id (%v)", err)
	}
	if _, err := a.sess.ApplicationCommandBulkOverwrite(app.ID, "", []*discordgo.ApplicationCommand{commandSpec()}, discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("discord: register commands: %w", err)
	}
	return nil
}

// slashCmd is one verified use of /marlowe.
type slashCmd struct {
	by        *discordgo.User
	mem       *discordgo.Member
	text      string // what the person would have typed after the mention
	ephemeral bool
}

// slashOf reads a /marlowe interaction. The actor is the interaction's
// member.user (in a guild) or user (in a DM), which Discord fills in; no
// option names anyone. refuse is the ephemeral answer when it cannot run.
func slashOf(i *discordgo.Interaction) (cmd slashCmd, refuse string) {
	switch {
	case i.Member != nil && i.Member.User != nil:
		cmd.by, cmd.mem = i.Member.User, i.Member
	case i.GuildID == "" && i.User != nil:
		cmd.by = i.User
	}
	if cmd.by == nil || cmd.by.ID == "" || i.ChannelID == "" {
		return cmd, "I can't tell who sent that, so I did nothing."
	}
	if cmd.by.Bot {
		return cmd, "I take commands from people only."
	}
	data, _ := commandData(i)
	if len(data.Options) != 1 || data.Options[0].Type != discordgo.ApplicationCommandOptionSubCommand {
		return cmd, "Use `/marlowe ask`, `/marlowe inbox`, `/marlowe routines` or `/marlowe status`."
	}
	sub := data.Options[0]
	switch sub.Name {
	case SubAsk:
		if o := sub.GetOption("task"); o != nil && o.Type == discordgo.ApplicationCommandOptionString {
			cmd.text, _ = o.Value.(string)
		}
		cmd.text = strings.TrimSpace(cmd.text)
		if cmd.text == "" {
			return cmd, "Tell me what to do: `/marlowe ask task:<what>`."
		}
		cmd.text = truncateRunes(cmd.text, maxTask)
	case SubInbox:
		cmd.text, cmd.ephemeral = SubInbox, true
	case SubRoutines, SubStatus:
		cmd.text = sub.Name
	default:
		return cmd, "I don't know that subcommand."
	}
	return cmd, ""
}

// commandData is i's command data, without discordgo's
// ApplicationCommandData, which panics when Data is not command data.
func commandData(i *discordgo.Interaction) (discordgo.ApplicationCommandInteractionData, bool) {
	d, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	return d, ok && i.Type == discordgo.InteractionApplicationCommand
}

func isSlash(i *discordgo.Interaction) bool {
	d, ok := commandData(i)
	return ok && d.Name == CommandName
}

// handleSlash defers the interaction first, before anything that may wait
// (locating the channel, the dedupe claim, the journal), so the 3 s hold
// whatever the load; then it delivers the message in the background.
func (a *Adapter) handleSlash(ctx context.Context, i *discordgo.Interaction, send respond) {
	cmd, refuse := slashOf(i)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if refuse != "" {
		_ = send(rctx, i, ephemeral(refuse))
		return
	}
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}
	if cmd.ephemeral {
		resp.Data = &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}
	}
	if err := send(rctx, i, resp); err != nil && !a.ackStands(err, i.ChannelID) {
		return
	}
	// Every session that got it goes on: the dedupe claim below lets one
	// deliver, and waits out a holder that died.
	it := discordgo.Interaction{ID: i.ID, AppID: i.AppID, Token: i.Token, Type: i.Type}
	guild, channel := i.GuildID, i.ChannelID
	a.background(func(ctx context.Context) { a.followSlash(ctx, &it, guild, channel, cmd) })
}

// ackStands logs a failed initial response and reports whether the
// interaction still stands: it does when another session acknowledged it
// first (one answer is all Discord takes); it does not when it expired.
func (a *Adapter) ackStands(err error, channel string) bool {
	if isStatus(err, http.StatusNotFound) {
		a.log.Warn("discord: interaction expired before it was acknowledged", "channel", channel)
		return false
	}
	if isCode(err, discordgo.ErrCodeInteractionHasAlreadyBeenAcknowledged) {
		a.log.Debug("discord: interaction already acknowledged by another session", "channel", channel)
		return true
	}
	a.log.Warn("discord: interaction ack failed", "channel", channel, "err", err)
	return false
}

// followSlash learns the deferred response's message, records the
// interaction under its id for the answer, and delivers the use as a
// message with that id: the run's thread is rooted at the response, as a
// mention's is at the mention.
func (a *Adapter) followSlash(ctx context.Context, it *discordgo.Interaction, guild, channel string, cmd slashCmd) {
	m, err := a.originalResponse(ctx, it)
	if err != nil {
		a.log.Warn("discord: slash command response unreadable; not delivered", "channel", channel, "err", err)
		return
	}
	if err := a.rememberSlash(ctx, m.ID, slashRecord{App: it.AppID, Token: it.Token, Ephemeral: cmd.ephemeral}); err != nil {
		a.log.Warn("discord: slash command not recorded; its answer will go to a thread", "channel", channel, "err", err)
	}
	a.ledger.ours(m.ID)
	w := a.locate(ctx, guild, channel)
	ev := core.Event{
		Scope: w.scope, Visibility: w.vis, MessageID: m.ID, Text: cmd.text, MentionsBot: true,
		Author: core.Person{ID: cmd.by.ID, Name: displayName(cmd.by, cmd.mem)},
		At:     snowflakeTime(it.ID),
	}
	if err := a.deliverOnce(ctx, "slash:"+it.ID, core.Inbound{Event: &ev}); err != nil && ctx.Err() == nil {
		a.log.Warn("discord: slash command not delivered", "channel", channel, "err", err)
		_ = a.editOriginal(context.WithoutCancel(ctx), it, "⚠️ That could not be recorded, so nothing was done. Please try again.")
	}
}

// originalResponse reads GET …/messages/@original. Over HTTP the deferral
// is the request's response, written after handleSlash returns, so the
// first reads may come too early.
func (a *Adapter) originalResponse(ctx context.Context, it *discordgo.Interaction) (*discordgo.Message, error) {
	var last error
	for attempt := 1; attempt <= 6; attempt++ {
		m, err := a.sess.InteractionResponse(it, discordgo.WithContext(ctx))
		if err == nil && m != nil && m.ID != "" {
			return m, nil
		}
		last = err
		if sleep(ctx, time.Duration(attempt)*100*time.Millisecond) != nil {
			break
		}
	}
	return nil, fmt.Errorf("discord: original response: %w", last)
}

// editOriginal replaces the deferred response's content, retrying an edit
// whose answer was lost (an edit is idempotent).
func (a *Adapter) editOriginal(ctx context.Context, it *discordgo.Interaction, text string) error {
	content := text
	edit := &discordgo.WebhookEdit{Content: &content, AllowedMentions: safeMentions()}
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if _, err = a.sess.InteractionResponseEdit(it, edit, discordgo.WithContext(ctx)); err == nil || !ambiguous(err) || ctx.Err() != nil {
			break
		}
		if sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("discord: edit interaction response: %w", err)
	}
	return nil
}
