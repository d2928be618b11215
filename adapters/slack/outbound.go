package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

// metaEventType tags every message the bot posts with its idempotency key
// (chat.postMessage metadata), so a post whose response was lost can be
// found again instead of being sent twice.
const metaEventType = "marlowe_post"

// outPart is one chat.postMessage worth of an Outbound.
type outPart struct {
	text   string
	blocks []slack.Block
}

// render turns an Outbound into messages: a card is one message (its text,
// if any, shown above it); plain text is split at MaxMessageChars.
func (a *Adapter) render(out core.Outbound) ([]outPart, error) {
	if out.Card != nil {
		blocks, fallback, err := renderCard(out.Card, out.Text)
		if err != nil {
			return nil, err
		}
		return []outPart{{text: fallback, blocks: blocks}}, nil
	}
	text := defang(out.Text)
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("slack: nothing to post (empty text and no card)")
	}
	var parts []outPart
	for _, t := range splitText(text, a.cfg.MaxMessageChars) {
		parts = append(parts, outPart{text: t})
	}
	return parts, nil
}

func checkScope(s core.Scope) error {
	if s.Platform != "" && s.Platform != Platform {
		return fmt.Errorf("slack: scope platform %q is not %q", s.Platform, Platform)
	}
	if s.Channel == "" {
		return errors.New("slack: scope has no channel")
	}
	return nil
}

// Post implements core.Surface. It posts in out.Scope.Thread when set (the
// thread root's ts). A key already posted returns the recorded ref without
// posting; a post whose response was lost is looked up by its metadata key
// before it is sent again. Long text becomes several messages; the ref
// returned is the first one's.
func (a *Adapter) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	out = defangOutbound(out)
	if err := checkScope(out.Scope); err != nil {
		return core.MessageRef{}, err
	}
	parts, err := a.render(out)
	if err != nil {
		return core.MessageRef{}, err
	}
	if out.Key != "" {
		unlock := a.ledger.lock(out.Key)
		defer unlock()
	}
	return a.ledger.posts.PostParts("slack", out.Key, len(parts), func(i int, pk string) (core.MessageRef, error) {
		return a.postPart(ctx, out, pk, parts[i])
	})
}

// postPart sends one message, retrying an in-doubt send only after checking
// that it did not land.
func (a *Adapter) postPart(ctx context.Context, out core.Outbound, key string, part outPart) (core.MessageRef, error) {
	scope := out.Scope
	scope.Platform = Platform
	if scope.Workspace == "" {
		scope.Workspace = a.identity().teamID
	}
	opts := []slack.MsgOption{slack.MsgOptionText(part.text, false)}
	if len(part.blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(part.blocks...))
	}
	if scope.Thread != "" {
		opts = append(opts, slack.MsgOptionTS(scope.Thread))
	}
	if key != "" {
		opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{
			EventType:    metaEventType,
			EventPayload: map[string]any{"key": key},
		}))
	}
	if key != "" && out.Resumed {
		// An earlier process may have sent this and died before recording
		// it: the in-memory ledger cannot know, the message metadata can.
		a.ledger.markDoubt(key, a.now().Add(-resumeLookback))
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if key != "" {
			if since, doubt := a.ledger.inDoubt(key); doubt {
				ref, found, err := a.findPosted(ctx, scope, key, since)
				if err != nil {
					return core.MessageRef{}, fmt.Errorf("slack: post %s is in doubt and the check failed: %w", key, err)
				}
				if found {
					a.log.InfoContext(ctx, "slack: in-doubt post found by its key; not posting again", "channel", scope.Channel, "ts", ref.ID)
					a.ledger.clearDoubt(key)
					return ref, nil
				}
			}
		}
		started := a.now()
		var ts string
		var sent atomic.Bool // read after do returns early on ctx: the call may still run
		err := a.pacer.send(ctx, "chat.postMessage", scope.Channel, out.Priority, "", func(ctx context.Context) error {
			sent.Store(true)
			var err error
			_, ts, err = a.api.PostMessageContext(ctx, scope.Channel, opts...)
			return err
		})
		if err == nil {
			if key != "" {
				a.ledger.clearDoubt(key)
			}
			return core.MessageRef{Scope: scope, ID: ts, At: parseTSOr(ts, a.now())}, nil
		}
		if !sent.Load() || !a.ambiguous(err) || key == "" {
			return core.MessageRef{}, fmt.Errorf("slack: chat.postMessage: %w", err)
		}
		a.ledger.markDoubt(key, started)
		if attempt >= attempts || ctx.Err() != nil {
			return core.MessageRef{}, fmt.Errorf("slack: chat.postMessage in doubt after %d attempts: %w", attempt, err)
		}
		a.log.WarnContext(ctx, "slack: post response lost; checking before retrying", "channel", scope.Channel, "attempt", attempt, "err", err)
		if sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			return core.MessageRef{}, fmt.Errorf("slack: chat.postMessage in doubt: %w", err)
		}
	}
}

// resumeLookback is how far back a resumed post is looked for.
const resumeLookback = 6 * time.Hour

// findPosted looks for a message the bot posted with key in its metadata,
// in the thread (conversations.replies) or at top level
// (conversations.history), from a minute before the in-doubt attempt.
func (a *Adapter) findPosted(ctx context.Context, scope core.Scope, key string, since time.Time) (core.MessageRef, bool, error) {
	oldest := fmt.Sprintf("%d.000000", since.Add(-time.Minute).Unix())
	self := a.identity()
	match := func(msgs []slack.Message) (core.MessageRef, bool) {
		for _, m := range msgs {
			if m.Metadata.EventType != metaEventType {
				continue
			}
			if k, _ := m.Metadata.EventPayload["key"].(string); k != key {
				continue
			}
			if self.botID != "" && m.BotID != "" && m.BotID != self.botID {
				continue
			}
			return core.MessageRef{Scope: scope, ID: m.Timestamp, At: parseTSOr(m.Timestamp, a.now())}, true
		}
		return core.MessageRef{}, false
	}
	cursor := ""
	for page := 0; page < 5; page++ {
		if err := a.historyWait(ctx); err != nil {
			return core.MessageRef{}, false, err
		}
		var (
			msgs []slack.Message
			next string
			err  error
		)
		if scope.Thread != "" {
			msgs, next, err = a.replies(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: scope.Channel, Timestamp: scope.Thread, Oldest: oldest, Cursor: cursor,
				Limit: 200, IncludeAllMetadata: true,
			})
		} else {
			msgs, next, err = a.channelHistory(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: scope.Channel, Oldest: oldest, Cursor: cursor, Limit: 200, IncludeAllMetadata: true,
			})
		}
		if err != nil {
			return core.MessageRef{}, false, err
		}
		if ref, ok := match(msgs); ok {
			return ref, true, nil
		}
		if next == "" {
			return core.MessageRef{}, false, nil
		}
		cursor = next
	}
	return core.MessageRef{}, false, nil
}

// Update implements core.Surface with chat.update. Checklist edits
// (PriorityEdit) to the same message that are still queued are coalesced.
// A card with Resolution set renders without buttons.
func (a *Adapter) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	out = defangOutbound(out)
	channel := ref.Scope.Channel
	if channel == "" {
		channel = out.Scope.Channel
	}
	if channel == "" || ref.ID == "" {
		return errors.New("slack: update needs the message's channel and ts")
	}
	var opts []slack.MsgOption
	if out.Card != nil {
		blocks, fallback, err := renderCard(out.Card, out.Text)
		if err != nil {
			return err
		}
		opts = append(opts, slack.MsgOptionText(fallback, false), slack.MsgOptionBlocks(blocks...))
	} else {
		text := defang(out.Text)
		if strings.TrimSpace(text) == "" {
			return errors.New("slack: nothing to update to (empty text and no card)")
		}
		if parts := splitText(text, a.cfg.MaxMessageChars); len(parts) > 1 {
			text = parts[0] + "\n…"
		}
		opts = append(opts, slack.MsgOptionText(text, false))
	}
	coalesce := ""
	if out.Priority == core.PriorityEdit {
		coalesce = ref.ID
	}
	// An edit sets the message's whole content, so repeating it is safe:
	// a transient failure is retried a few times rather than leaving, say,
	// a finished run's checklist saying "Working on it" for good.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		err := a.pacer.update(ctx, channel, out.Priority, coalesce, func(ctx context.Context) error {
			_, _, _, err := a.api.UpdateMessageContext(ctx, channel, ref.ID, opts...)
			return err
		})
		if err == nil {
			return nil
		}
		if attempt >= attempts || !retryableEdit(err) || ctx.Err() != nil {
			return fmt.Errorf("slack: chat.update: %w", err)
		}
		a.log.WarnContext(ctx, "slack: chat.update failed; retrying", "channel", channel, "attempt", attempt, "err", err)
		if sleep(ctx, time.Duration(attempt)*200*time.Millisecond) != nil {
			return fmt.Errorf("slack: chat.update: %w", err)
		}
	}
}

// retryableEdit reports whether a failed chat.update may succeed if sent
// again: Slack's own transient errors, a 5xx, or no answer at all (network).
// Definite refusals (message_not_found, cant_update_message, …) are final.
func retryableEdit(err error) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return true
		}
		return false
	}
	return isAmbiguous(err)
}

// React implements core.Surface with reactions.add (":eyes:" or "eyes").
// Reacting twice is not an error.
func (a *Adapter) React(ctx context.Context, ref core.MessageRef, emoji string) error {
	name := strings.Trim(emoji, ":")
	if ref.Scope.Channel == "" || ref.ID == "" || name == "" {
		return errors.New("slack: react needs a channel, a ts and an emoji name")
	}
	// A decoration: on reactions.add's own budget, dropped over it.
	err := a.pacer.decorate(ctx, keyReactions, func(ctx context.Context) error {
		return a.api.AddReactionContext(ctx, name, slack.NewRefToMessage(ref.Scope.Channel, ref.ID))
	})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "already_reacted" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("slack: reactions.add: %w", err)
	}
	return nil
}

// OpenDM implements core.Surface with conversations.open.
func (a *Adapter) OpenDM(ctx context.Context, userID string) (core.Scope, error) {
	if userID == "" {
		return core.Scope{}, errors.New("slack: open DM: no user id")
	}
	var ch *slack.Channel
	err := a.pacer.lookup(ctx, "conversations.open", func(ctx context.Context) error {
		var err error
		ch, _, _, err = a.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{userID}, ReturnIM: true})
		return err
	})
	if err != nil {
		return core.Scope{}, fmt.Errorf("slack: conversations.open: %w", err)
	}
	if ch == nil || ch.ID == "" {
		return core.Scope{}, errors.New("slack: conversations.open returned no channel")
	}
	a.vis.put(ch.ID, core.DM)
	return core.Scope{Platform: Platform, Workspace: a.identity().teamID, Channel: ch.ID}, nil
}

// History implements core.Surface: the last limit messages of a thread
// (conversations.replies) or, for a top-level scope, of the channel
// (conversations.history), oldest first. These reads are severely
// rate-limited for most apps: callers should build context from delivered
// events and read history sparingly; calls are spaced by the history gate.
func (a *Adapter) History(ctx context.Context, thread core.Scope, limit int) ([]core.Event, error) {
	if err := checkScope(thread); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	team := thread.Workspace
	if team == "" {
		team = a.identity().teamID
	}
	var msgs []slack.Message
	cursor := ""
	for page := 0; page < 10; page++ {
		if err := a.historyWait(ctx); err != nil {
			return nil, err
		}
		var (
			batch []slack.Message
			next  string
			err   error
		)
		if thread.Thread != "" {
			batch, next, err = a.replies(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: thread.Channel, Timestamp: thread.Thread, Cursor: cursor, Limit: min(limit+1, 200),
			})
		} else {
			batch, next, err = a.channelHistory(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: thread.Channel, Cursor: cursor, Limit: min(limit, 200),
			})
		}
		if err != nil {
			return nil, fmt.Errorf("slack: history: %w", err)
		}
		msgs = append(msgs, batch...)
		if next == "" || (thread.Thread == "" && len(msgs) >= limit) {
			break
		}
		cursor = next
	}
	if thread.Thread == "" {
		slices.Reverse(msgs) // conversations.history is newest first
	}
	if len(msgs) > limit {
		msgs = msgs[len(msgs)-limit:]
	}
	vis := a.resolveVisibility(ctx, thread.Channel, "")
	self := a.identity()
	out := make([]core.Event, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, normalise(message{
			team: team, channel: thread.Channel, ts: m.Timestamp, threadTS: m.ThreadTimestamp,
			user: m.User, botID: m.BotID, username: m.Username, subtype: m.SubType, text: m.Text,
			files: m.Files,
		}, vis, self))
	}
	return out, nil
}

// replies reads one page of a thread (conversations.replies) in the
// channel's queue of reads: a 429's Retry-After is waited out.
// The page is read only once the call has returned: a caller whose ctx
// ended may leave the call running.
func (a *Adapter) replies(ctx context.Context, params *slack.GetConversationRepliesParameters) ([]slack.Message, string, error) {
	var (
		msgs []slack.Message
		next string
	)
	err := a.pacer.read(ctx, "conversations.replies", params.ChannelID, func(ctx context.Context) error {
		var err error
		msgs, _, next, err = a.api.GetConversationRepliesContext(ctx, params)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return msgs, next, nil
}

// channelHistory reads one page of a channel (conversations.history) in
// the channel's queue of reads: a 429's Retry-After is waited out.
func (a *Adapter) channelHistory(ctx context.Context, params *slack.GetConversationHistoryParameters) ([]slack.Message, string, error) {
	var res *slack.GetConversationHistoryResponse
	err := a.pacer.read(ctx, "conversations.history", params.ChannelID, func(ctx context.Context) error {
		var err error
		res, err = a.api.GetConversationHistoryContext(ctx, params)
		return err
	})
	if err != nil || res == nil {
		return nil, "", err
	}
	return res.Messages, res.ResponseMetaData.NextCursor, nil
}

// historyWait spaces history reads by the history interval.
func (a *Adapter) historyWait(ctx context.Context) error {
	a.histMu.Lock()
	next := a.histLast.Add(a.historyGap)
	now := a.now()
	if next.Before(now) {
		next = now
	}
	a.histLast = next
	a.histMu.Unlock()
	if d := next.Sub(now); d > 0 {
		return sleep(ctx, d)
	}
	return nil
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

// isAmbiguous reports whether a failed chat.postMessage may nevertheless
// have posted: anything but a definite answer from Slack (an ok:false
// error, a 429, or a 4xx status).
func isAmbiguous(err error) bool {
	if err == nil {
		return false
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return false
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return false
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= http.StatusInternalServerError
	}
	return true
}

func parseTSOr(ts string, fallback time.Time) time.Time {
	if t := parseTS(ts); !t.IsZero() {
		return t
	}
	return fallback
}
