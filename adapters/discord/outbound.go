package discord

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
)

// createBody is POST channels/{id}/messages. discordgo's MessageSend has no
// nonce; enforce_nonce makes Discord return the message already created
// with this nonce (for a few minutes) instead of posting it twice.
type createBody struct {
	Content         string                            `json:"content,omitempty"`
	Components      []discordgo.MessageComponent      `json:"components,omitempty"`
	Nonce           string                            `json:"nonce,omitempty"`
	EnforceNonce    bool                              `json:"enforce_nonce,omitempty"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
}

// editBody is PATCH channels/{id}/messages/{mid}. Components is always
// sent: an empty list removes a decided card's buttons.
type editBody struct {
	Content         string                            `json:"content"`
	Components      []discordgo.MessageComponent      `json:"components"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
}

// safeMentions lets an answer ping the users it names but never @everyone,
// @here or a role, whatever the model or a quoted message wrote.
func safeMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{discordgo.AllowedMentionTypeUsers}}
}

// nonceOf derives the message nonce (at most 25 characters) from an
// effect's idempotency key.
func nonceOf(key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte("marlowe-nonce\x00" + key))
	return base64.RawURLEncoding.EncodeToString(h[:])[:25]
}

func checkScope(s core.Scope) error {
	if s.Platform != "" && s.Platform != Platform {
		return fmt.Errorf("discord: scope platform %q is not %q", s.Platform, Platform)
	}
	if s.Channel == "" {
		return errors.New("discord: scope has no channel")
	}
	return nil
}

// render turns an Outbound into message bodies: a card is one message; text
// is split at MaxMessageChars without breaking code blocks.
func (a *Adapter) render(out core.Outbound) ([]createBody, error) {
	if out.Card != nil {
		content, comps, err := renderCard(out.Card, out.Text)
		if err != nil {
			return nil, err
		}
		return []createBody{{Content: content, Components: comps}}, nil
	}
	if strings.TrimSpace(out.Text) == "" {
		return nil, errors.New("discord: nothing to post (empty text and no card)")
	}
	var parts []createBody
	for _, t := range splitMessage(out.Text, a.cfg.MaxMessageChars) {
		parts = append(parts, createBody{Content: t})
	}
	return parts, nil
}

// Post implements core.Surface. Scope.Thread set means "in the thread of
// that message": an existing thread channel is posted in; otherwise a
// thread is started on the message (POST channels/{c}/messages/{m}/threads,
// whose id is the message's). Every create carries a nonce derived from
// the key with enforce_nonce, so a retried or re-issued post returns the
// first message instead of a second one. Long text becomes several
// messages; the ref returned is the first one's.
func (a *Adapter) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	if err := checkScope(out.Scope); err != nil {
		return core.MessageRef{}, err
	}
	if ref, ok, err := a.answerSlash(ctx, out); ok || err != nil {
		return ref, err
	}
	parts, err := a.render(out)
	if err != nil {
		return core.MessageRef{}, err
	}
	if out.Key != "" {
		unlock := a.ledger.lock(out.Key)
		defer unlock()
	}
	scope := out.Scope
	scope.Platform = Platform
	target, err := a.target(ctx, scope, out.Priority)
	if err != nil {
		return core.MessageRef{}, err
	}
	return a.ledger.posts.PostParts("discord", out.Key, len(parts), func(i int, pk string) (core.MessageRef, error) {
		part := parts[i]
		part.Nonce, part.EnforceNonce = nonceOf(pk), pk != ""
		part.AllowedMentions = safeMentions()
		m, err := a.create(ctx, target, out.Priority, part)
		if err != nil {
			return core.MessageRef{}, err
		}
		at := m.Timestamp
		if at.IsZero() {
			at = snowflakeTime(m.ID)
		}
		a.ledger.ours(m.ID)
		a.notePosted(target, m.ID)
		return core.MessageRef{Scope: scope, ID: m.ID, At: at}, nil
	})
}

// create sends one message, retrying a send whose answer was lost with the
// same nonce (Discord then returns the message it already has).
func (a *Adapter) create(ctx context.Context, channel string, prio core.Priority, body createBody) (*discordgo.Message, error) {
	const attempts = 3
	url := discordgo.EndpointChannelMessages(channel)
	for attempt := 1; ; attempt++ {
		var m discordgo.Message
		var sent atomic.Bool
		err := a.pacer.send(ctx, routeCreate, channel, prio, "", func(ctx context.Context) error {
			sent.Store(true)
			res, err := a.sess.RequestWithBucketID(http.MethodPost, url, body, url, discordgo.WithContext(ctx))
			if err != nil {
				return err
			}
			return json.Unmarshal(res, &m)
		})
		if err == nil {
			if m.ID == "" {
				return nil, errors.New("discord: create message: no id in the answer")
			}
			return &m, nil
		}
		if !sent.Load() || !ambiguous(err) || body.Nonce == "" || attempt >= attempts || ctx.Err() != nil {
			return nil, fmt.Errorf("discord: create message in %s: %w", channel, err)
		}
		a.log.WarnContext(ctx, "discord: create message answer lost; retrying with the same nonce", "channel", channel, "attempt", attempt, "err", err)
		if sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			return nil, fmt.Errorf("discord: create message in %s: %w", channel, err)
		}
	}
}

// target is the channel a scope posts in: the thread channel when Thread is
// set (started on the message when it does not exist yet), else the channel.
func (a *Adapter) target(ctx context.Context, s core.Scope, prio core.Priority) (string, error) {
	if s.Thread == "" {
		return s.Channel, nil
	}
	if c, ok := a.chans.get(s.Thread); ok && isThread(c.typ) {
		return s.Thread, nil
	}
	unlock := a.ledger.lock("thread:" + s.Thread)
	defer unlock()
	if ok, err := a.threadExists(ctx, s.Thread); err != nil {
		return "", err
	} else if ok {
		return s.Thread, nil
	}
	name, ok := a.hints.get(s.Thread)
	if !ok {
		name = "Marlowe"
	}
	url := discordgo.EndpointChannelMessageThread(s.Channel, s.Thread)
	body := map[string]any{"name": name, "auto_archive_duration": 1440}
	var th discordgo.Channel
	err := a.pacer.send(ctx, routeThread, s.Channel, prio, "", func(ctx context.Context) error {
		res, err := a.sess.RequestWithBucketID(http.MethodPost, url, body, discordgo.EndpointChannelThreads(s.Channel), discordgo.WithContext(ctx))
		if err != nil {
			return err
		}
		return json.Unmarshal(res, &th)
	})
	switch {
	case err == nil:
		if th.ID == "" {
			th.ID = s.Thread
		}
		if th.GuildID == "" {
			th.GuildID = s.Workspace
		}
		if th.ParentID == "" {
			th.ParentID = s.Channel
		}
		if th.Type == 0 {
			th.Type = discordgo.ChannelTypeGuildPublicThread
		}
		a.chans.put(th.ID, infoOf(&th))
		return th.ID, nil
	case isCode(err, discordgo.ErrCodeThreadAlreadyCreatedForThisMessage):
		return s.Thread, nil
	}
	return "", fmt.Errorf("discord: start thread on %s: %w", s.Thread, err)
}

// threadExists reports whether id is a thread channel: from the cache, else
// asked of Discord (and cached when it is).
func (a *Adapter) threadExists(ctx context.Context, id string) (bool, error) {
	if c, ok := a.chans.get(id); ok && isThread(c.typ) {
		return true, nil
	}
	c, err := a.sess.Channel(id, discordgo.WithContext(ctx))
	if err == nil && c != nil && isThread(c.Type) {
		a.chans.put(c.ID, infoOf(c))
		return true, nil
	}
	if err != nil && !isCode(err, discordgo.ErrCodeUnknownChannel) && !isStatus(err, http.StatusNotFound) {
		return false, fmt.Errorf("discord: look up thread %s: %w", id, err)
	}
	return false, nil
}

// Update implements core.Surface with PATCH. Queued checklist edits
// (PriorityEdit) of one message are coalesced; a card with Resolution
// renders without buttons.
func (a *Adapter) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	scope := ref.Scope
	if scope.Channel == "" {
		scope = out.Scope
	}
	channel := scope.Thread
	if channel == "" {
		channel = scope.Channel
	}
	if channel == "" || ref.ID == "" {
		return errors.New("discord: update needs the message's channel and id")
	}
	body := editBody{Components: []discordgo.MessageComponent{}, AllowedMentions: safeMentions()}
	if out.Card != nil {
		content, comps, err := renderCard(out.Card, out.Text)
		if err != nil {
			return err
		}
		body.Content = content
		if comps != nil {
			body.Components = comps
		}
	} else {
		if strings.TrimSpace(out.Text) == "" {
			return errors.New("discord: nothing to update to (empty text and no card)")
		}
		body.Content = out.Text
		if parts := splitMessage(out.Text, a.cfg.MaxMessageChars-2); len(parts) > 1 {
			body.Content = parts[0] + "\n…"
		}
	}
	coalesce := ""
	if out.Priority == core.PriorityEdit {
		coalesce = ref.ID
	}
	url := discordgo.EndpointChannelMessage(channel, ref.ID)
	bucket := discordgo.EndpointChannelMessages(channel) + "/"
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := a.pacer.send(ctx, routeEdit, channel, out.Priority, coalesce, func(ctx context.Context) error {
			_, err := a.sess.RequestWithBucketID(http.MethodPatch, url, body, bucket, discordgo.WithContext(ctx))
			return err
		})
		if err == nil {
			a.notePosted(channel, "")
			return nil
		}
		// An edit sets the whole content, so repeating it is safe.
		if attempt >= attempts || !ambiguous(err) || ctx.Err() != nil {
			return fmt.Errorf("discord: edit message: %w", err)
		}
		if sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			return fmt.Errorf("discord: edit message: %w", err)
		}
	}
}

// emojiNames maps the Slack-style names the engine uses to Unicode.
var emojiNames = map[string]string{
	"eyes": "👀", "white_check_mark": "✅", "x": "❌", "hourglass": "⏳",
	"hourglass_flowing_sand": "⏳", "warning": "⚠️", "thumbsup": "👍", "+1": "👍",
}

// React implements core.Surface (PUT …/reactions/{emoji}/@me). Reacting
// twice is not an error.
func (a *Adapter) React(ctx context.Context, ref core.MessageRef, emoji string) error {
	name := strings.Trim(emoji, ":")
	if u, ok := emojiNames[name]; ok {
		name = u
	}
	if ref.Scope.Channel == "" || ref.ID == "" || name == "" {
		return errors.New("discord: react needs a channel, a message id and an emoji")
	}
	if _, ok := a.slashOfMessage(ctx, ref.ID); ok {
		// A slash command's response shows "is thinking…" already; its
		// ephemeral kind takes no reaction at all.
		return nil
	}
	// A thread's messages live in the thread channel; its starter message
	// (whose id is the thread's) lives in the parent.
	channel := ref.Scope.Channel
	if ref.Scope.Thread != "" && ref.Scope.Thread != ref.ID {
		channel = ref.Scope.Thread
	}
	// A decoration: on the channel's own reaction budget, dropped over it.
	// Not through MessageReactionAdd: its bucket id ends in discordgo's
	// "//reactions//", whose own 200 ms limit, counted from when an answer
	// came back, replaces the bucket headers, so a reaction let through by
	// the pacer's clock could reach Discord inside the 250 ms window. Under
	// a bucket id of its own discordgo keeps to Remaining/Reset-After;
	// when they say the bucket is spent, the reaction is dropped rather
	// than left to sleep in discordgo (the engine's 👀 is synchronous).
	endpoint := discordgo.EndpointMessageReaction(channel, ref.ID, strings.ReplaceAll(name, "#", "%23"), "@me")
	bucket := discordgo.EndpointChannel(channel) + "/reactions"
	err := a.pacer.decorate(ctx, "reactions", channel, func(ctx context.Context) error {
		if a.bucketSpent(bucket) {
			return pq.ErrDropped
		}
		_, err := a.sess.RequestWithBucketID(http.MethodPut, endpoint, nil, bucket, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		return fmt.Errorf("discord: add reaction: %w", err)
	}
	return nil
}

// OpenDM implements core.Surface (POST users/@me/channels).
func (a *Adapter) OpenDM(ctx context.Context, userID string) (core.Scope, error) {
	if userID == "" {
		return core.Scope{}, errors.New("discord: open DM: no user id")
	}
	ch, err := a.sess.UserChannelCreate(userID, discordgo.WithContext(ctx))
	if err != nil {
		return core.Scope{}, fmt.Errorf("discord: open DM: %w", err)
	}
	if ch == nil || ch.ID == "" {
		return core.Scope{}, errors.New("discord: open DM: no channel in the answer")
	}
	a.chans.put(ch.ID, chanInfo{typ: discordgo.ChannelTypeDM})
	return core.Scope{Platform: Platform, Channel: ch.ID}, nil
}

// History implements core.Surface: the last limit messages of a thread (or,
// for a top-level scope, of the channel), oldest first; for a thread
// started on a message, that message comes first.
func (a *Adapter) History(ctx context.Context, thread core.Scope, limit int) ([]core.Event, error) {
	if err := checkScope(thread); err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), 100)
	channel := thread.Channel
	if thread.Thread != "" {
		channel = thread.Thread
	}
	var msgs []*discordgo.Message
	err := a.pacer.send(ctx, routeRead, channel, core.PriorityNormal, "", func(ctx context.Context) error {
		var err error
		msgs, err = a.channelMessages(channel, limit, "", discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("discord: history: %w", err)
	}
	slices.Reverse(msgs) // newest first on the wire
	if thread.Thread != "" && (len(msgs) == 0 || msgs[0].ID != thread.Thread) && len(msgs) < limit {
		if root, err := a.channelMessage(thread.Channel, thread.Thread, discordgo.WithContext(ctx)); err == nil && root != nil {
			msgs = append([]*discordgo.Message{root}, msgs...)
		}
	}
	self := a.identity()
	w := where{scope: thread}
	w.scope.Platform = Platform
	loc := a.locate(ctx, thread.Workspace, channel)
	w.vis = loc.vis
	if slices.ContainsFunc(msgs, func(m *discordgo.Message) bool { return m != nil && len(m.MentionRoles) > 0 }) {
		w.botRoles = a.botRolesOf(ctx, thread.Workspace)
	}
	out := make([]core.Event, 0, len(msgs))
	for _, m := range msgs {
		if m == nil || m.Author == nil {
			continue
		}
		replyToBot := m.ReferencedMessage != nil && m.ReferencedMessage.Author != nil && m.ReferencedMessage.Author.ID == self.userID
		out = append(out, normalise(m, w, self, replyToBot))
	}
	return out, nil
}

// ambiguous reports whether a failed request may nevertheless have taken
// effect: anything but a definite answer (a 4xx, a 429).
func ambiguous(err error) bool {
	if err == nil {
		return false
	}
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) {
		return false
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) {
		return re.Response != nil && re.Response.StatusCode >= http.StatusInternalServerError
	}
	return !errors.Is(err, context.Canceled)
}

func isCode(err error, code int) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Message != nil && re.Message.Code == code
}

func isStatus(err error, status int) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == status
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
