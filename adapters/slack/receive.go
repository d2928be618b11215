package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/delivery"
)

// errAckTimeout means deliver did not return within Config.AckTimeout; the
// event is left unacknowledged so Slack redelivers it (deduplicated).
var errAckTimeout = errors.New("slack: deliver did not return within the ack timeout")

// errInFlight means another delivery of the same message held its claim
// until the ack deadline; the event is left unacknowledged.
var errInFlight = errors.New("slack: another delivery of this message is in flight")

// errNotRunning is returned to HTTP requests that arrive while no Run is active.
var errNotRunning = errors.New("slack: adapter is not running")

// inbound is one normalised item waiting for deliver.
type inbound struct {
	key     string // dedupe key: ids only
	channel string // for per-channel ordering
	in      core.Inbound
	// replay marks a click delivered afresh (not Slack's retry): when its
	// key was delivered before, it is the same press sent again, which the
	// engine refuses visibly ("already decided") instead of it vanishing.
	replay bool
}

// markReplays flags click items of a first (non-retry) delivery; see
// inbound.replay.
func markReplays(items []inbound, retry int) []inbound {
	if retry > 0 {
		return items
	}
	for i := range items {
		if items[i].in.Click != nil {
			items[i].replay = true
		}
	}
	return items
}

// fromEventsAPI turns an Events API callback into inbound items (zero or
// one). Unknown inner events yield none: they are acknowledged and dropped.
func (a *Adapter) fromEventsAPI(ctx context.Context, ev slackevents.EventsAPIEvent) []inbound {
	if ev.Type != slackevents.CallbackEvent || a.lifecycle(ev) {
		return nil
	}
	team := ev.TeamID
	if team == "" {
		team = a.identity().teamID
	}
	var m message
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		m = message{
			team: team, channel: e.Channel, ts: e.TimeStamp, threadTS: e.ThreadTimeStamp,
			user: e.User, botID: e.BotID, text: e.Text, edited: e.Edited != nil, files: e.Files,
		}
	case *slackevents.MessageEvent:
		m = message{
			team: team, channel: e.Channel, channelType: e.ChannelType, ts: e.TimeStamp,
			threadTS: e.ThreadTimeStamp, user: e.User, botID: e.BotID, username: e.Username,
			subtype: e.SubType, text: e.Text,
		}
		if e.Message != nil && normSubtype(e.SubType) == "" {
			// A plain message's own fields (slack-go decodes them into
			// Message); a file_share's files are among them.
			m.files = e.Message.Files
		}
		if m.user == "" && e.Message != nil && e.SubType != "" {
			// message_changed and friends carry the author in the nested message.
			m.user = e.Message.User
			if m.botID == "" {
				m.botID = e.Message.BotID
			}
		}
	case *slackevents.AppHomeOpenedEvent:
		a.homeOpened(ctx, e)
		return nil
	case *slackevents.AssistantThreadStartedEvent:
		a.assistantStarted(ctx, e)
		return nil
	default:
		a.log.Debug("slack: event type not handled", "type", ev.InnerEvent.Type)
		return nil
	}
	if m.channel == "" || m.ts == "" {
		a.log.Debug("slack: message event without channel or ts dropped", "type", ev.InnerEvent.Type)
		return nil
	}
	if m.user == "" && m.botID == "" {
		// No author at all: a deletion (message_deleted carries only
		// previous_message), a hidden system notice, or a malformed payload.
		// Nobody to answer, and the engine only takes events with a
		// verified author (it would refuse this one, leaving it
		// unacknowledged for Slack to redeliver forever): acknowledged and
		// dropped here.
		a.log.Debug("slack: message event without an author dropped", "type", ev.InnerEvent.Type, "subtype", m.subtype)
		return nil
	}
	vis := a.resolveVisibility(ctx, m.channel, m.channelType)
	ev2 := normalise(m, vis, a.identity())
	return []inbound{{
		key:     "msg:" + team + ":" + m.channel + ":" + m.ts,
		channel: m.channel,
		in:      core.Inbound{Event: &ev2},
	}}
}

// fromInteraction turns a block_actions payload into card clicks. Other
// interaction types yield none.
func (a *Adapter) fromInteraction(ic *slack.InteractionCallback) []inbound {
	if ic.Type != slack.InteractionTypeBlockActions {
		return nil
	}
	team := ic.Team.ID
	if team == "" {
		team = a.identity().teamID
	}
	channel := ic.Channel.ID
	if channel == "" {
		channel = ic.Container.ChannelID
	}
	thread := ic.Container.ThreadTs
	if thread == "" {
		thread = ic.Message.ThreadTimestamp
	}
	msgTS := ic.Container.MessageTs
	if msgTS == "" {
		msgTS = ic.Message.Timestamp
	}
	thread = threadOf(msgTS, thread)
	name := ic.User.Name
	if name == "" {
		name = ic.User.Profile.DisplayName
	}
	var out []inbound
	for _, act := range ic.ActionCallback.BlockActions {
		if act == nil || ic.User.ID == "" || channel == "" {
			continue
		}
		at := parseTS(act.ActionTs)
		if at.IsZero() {
			at = parseTS(ic.ActionTs)
		}
		click := core.CardClick{
			Scope:  core.Scope{Platform: Platform, Workspace: team, Channel: channel, Thread: thread},
			Card:   act.BlockID,
			Action: act.ActionID,
			Token:  act.Value,
			By:     core.Person{ID: ic.User.ID, Name: name},
			At:     at,
		}
		stamp := act.ActionTs
		if stamp == "" {
			stamp = ic.ActionTs
		}
		if stamp == "" {
			stamp = ic.TriggerID
		}
		out = append(out, inbound{
			key:     "click:" + team + ":" + channel + ":" + msgTS + ":" + ic.User.ID + ":" + act.ActionID + ":" + stamp,
			channel: channel,
			in:      core.Inbound{Click: &click},
		})
	}
	return out
}

// deliverAll delivers items in order; it stops at the first failure (the
// whole envelope stays unacknowledged and comes back).
func (a *Adapter) deliverAll(ctx context.Context, items []inbound, deliver func(context.Context, core.Inbound) error, deadline time.Time) error {
	for _, it := range items {
		if err := a.deliverOnce(ctx, it, deliver, deadline); err != nil {
			return err
		}
	}
	return nil
}

// deliverOnce hands one item to deliver unless it was delivered before:
// the delivery contract (internal/delivery). It returns nil when the item
// may be acknowledged: deliver returned nil (now or in an earlier
// delivery). The wait is bounded by deadline, Slack's ack deadline; a
// deliver that finishes later still settles its claim, so the redelivery
// is deduped. Slack redelivers, so nothing is retried here.
func (a *Adapter) deliverOnce(ctx context.Context, it inbound, deliver func(context.Context, core.Inbound) error, deadline time.Time) error {
	// deadline is on the injected clock: the wait is measured there, not
	// against the wall clock (which a test's clock, or a skew, would make
	// already past or hours away).
	left := deadline.Sub(a.now())
	dctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()

	done := make(chan error, 1)
	a.bg.Go(func() {
		res, err := a.claims.Deliver(dctx, it.key, func(ctx context.Context) error { return deliver(ctx, it.in) })
		if err == nil && res == delivery.Duplicate && it.replay {
			// The same click again, and not as Slack's retry: let the
			// engine see it, so the person is told it was already decided
			// (it never executes anything twice).
			a.log.Debug("slack: replayed click delivered for a visible refusal", "channel", it.channel)
			err = deliver(dctx, it.in)
		}
		done <- err
	})

	timer := time.NewTimer(left)
	defer timer.Stop()
	select {
	case err := <-done:
		switch {
		case errors.Is(err, delivery.ErrInFlight):
			return errInFlight
		case err != nil:
			return fmt.Errorf("slack: %w", err)
		}
		return nil
	case <-timer.C:
		return errAckTimeout
	}
}

// resolveVisibility tells public, private and DM apart: channel_type when
// the event has it (message events), else the cache of earlier events, else
// conversations.info, else a conservative guess from the id.
func (a *Adapter) resolveVisibility(ctx context.Context, channel, channelType string) core.Visibility {
	if v, ok := visibilityOfType(channelType); ok {
		a.vis.put(channel, v)
		return v
	}
	if v, ok := a.vis.get(channel); ok {
		return v
	}
	if strings.HasPrefix(channel, "D") {
		return core.DM
	}
	// The event waits for this answer, so the lookup goes only if its
	// tier has room now: after a cold start in a busy workspace, waiting
	// for budget would hold every unknown channel's acknowledgement. The
	// guess is not cached; the channel's next event asks again.
	if !a.pacer.lookupReady("conversations.info") {
		a.log.Debug("slack: conversations.info has no budget now; visibility guessed from the id", "channel", channel)
		return visibilityFallback(channel)
	}
	ictx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	ch, err := a.conversationInfo(ictx, channel)
	if err != nil || ch == nil {
		a.log.Debug("slack: conversations.info failed; visibility guessed from the id", "channel", channel, "err", err)
		return visibilityFallback(channel)
	}
	v := visibilityOfChannel(ch)
	a.vis.put(channel, v)
	return v
}

func visibilityOfChannel(ch *slack.Channel) core.Visibility {
	switch {
	case ch.IsIM:
		return core.DM
	case ch.IsMpIM, ch.IsPrivate, ch.IsGroup:
		return core.Private
	default:
		return core.Public
	}
}

// visCache remembers channel visibility learnt from events; bounded (it is
// reset when full, and refills from the next events).
type visCache struct {
	mu  sync.RWMutex
	max int
	m   map[string]core.Visibility
}

func newVisCache(max int) *visCache {
	return &visCache{max: max, m: make(map[string]core.Visibility)}
}

func (c *visCache) get(ch string) (core.Visibility, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[ch]
	return v, ok
}

func (c *visCache) put(ch string, v core.Visibility) {
	c.mu.RLock()
	old, ok := c.m[ch]
	c.mu.RUnlock()
	if ok && old == v {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[ch] = v
}
