package discord

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// Gap fill. A RESUME makes Discord replay what a session missed; a fresh
// IDENTIFY (a non-resumable op 9, a close code that forbids resuming, a
// resume URL given up after a long outage) starts a session that replays
// nothing. After such a re-IDENTIFY the adapter reads, for each channel the
// bot was in a conversation in, the messages after the newest one it had
// seen there (GET channels/{id}/messages?after=, bounded) and hands them to
// the shard workers like gateway messages: the deduper drops any already
// delivered, and the engine's filter and windows decide the rest. A message
// older than Config.GapMaxAge is not delivered: it would be answered too
// late to be an answer.
//
// A process restart loses what this process saw, so a GapSource (the
// journal, wired by the composition root) names the channels that had a
// live intent window or an unfinished run, with the newest message id
// journaled in each. With a source the fill runs after every IDENTIFY,
// the first of a restarted process included; without one only after a
// re-IDENTIFY, from what this process saw.

// GapSource names, from durable state, the channels a new session should
// read what was posted in while no session existed.
type GapSource interface {
	// GapChannels lists Discord channel ids (a thread is its own channel)
	// with a message id journaled there; for a channel listed more than
	// once the newest id counts. It must be a bounded read.
	GapChannels(ctx context.Context) ([]GapChannel, error)
}

// GapChannel is one channel to read after message id After.
type GapChannel struct {
	Channel, After string
	// listed: read because GUILD_CREATE showed a recent message there
	// (gapguilds.go), not because anyone named it.
	listed bool
}

// WithGapSource makes every IDENTIFY read, besides what this process saw,
// the channels src names (see GapSource).
func WithGapSource(src GapSource) Option {
	return func(a *Adapter) { a.gapSource = src }
}

// Bounds of one gap fill.
const (
	gapMaxChannels = 200 // most urgent first: this process's, then the source's order
	gapPages       = 3   // pages of 100 per channel
)

// gaps remembers, per Discord channel id (a thread is its own channel), the
// newest message id seen there and when the bot last took part: posted,
// edited, or was addressed (a mention, a reply to it, a DM).
type gaps struct {
	mu     sync.Mutex
	last   map[string]string
	active map[string]time.Time
	max    int
}

func newGaps(max int) *gaps {
	return &gaps{last: map[string]string{}, active: map[string]time.Time{}, max: max}
}

// seen records message id in channel (the newest id wins).
func (g *gaps) seen(channel, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if snowflakeLess(g.last[channel], id) {
		if _, ok := g.last[channel]; !ok && len(g.last) >= g.max {
			g.evictLocked()
		}
		g.last[channel] = id
	}
}

// touch marks channel as one the bot takes part in, as of at.
func (g *gaps) touch(channel string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.active[channel]; !ok && len(g.active) >= g.max {
		g.evictLocked()
	}
	if at.After(g.active[channel]) {
		g.active[channel] = at
	}
}

// evictLocked drops the least recently active half.
func (g *gaps) evictLocked() {
	type kv struct {
		ch string
		at time.Time
	}
	var all []kv
	for ch, at := range g.active {
		all = append(all, kv{ch, at})
	}
	slices.SortFunc(all, func(a, b kv) int { return a.at.Compare(b.at) })
	for _, e := range all[:len(all)/2] {
		delete(g.active, e.ch)
		delete(g.last, e.ch)
	}
	for ch := range g.last {
		if _, ok := g.active[ch]; !ok {
			delete(g.last, ch)
		}
	}
}

// due lists the channels active since since (newest first, at most n) with
// the newest message id seen in each.
func (g *gaps) due(since time.Time, n int) []GapChannel {
	g.mu.Lock()
	defer g.mu.Unlock()
	type kv struct {
		GapChannel
		at time.Time
	}
	var all []kv
	for ch, at := range g.active {
		if at.Before(since) || g.last[ch] == "" {
			continue
		}
		all = append(all, kv{GapChannel{Channel: ch, After: g.last[ch]}, at})
	}
	slices.SortFunc(all, func(a, b kv) int { return b.at.Compare(a.at) })
	out := make([]GapChannel, 0, min(len(all), n))
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].GapChannel)
	}
	return out
}

// isSnowflake reports whether s looks like a Discord id (decimal digits).
func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// snowflakeLess orders message ids ("" first).
func snowflakeLess(a, b string) bool {
	return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) < 0
}

// noteReceived records a delivered message for gap fill.
func (a *Adapter) noteReceived(m *discordgo.Message, ev *core.Event) {
	a.gaps.seen(m.ChannelID, m.ID)
	if ev.MentionsBot || ev.ReplyToBot || ev.Visibility == core.DM {
		a.gaps.touch(m.ChannelID, a.now())
	}
}

// notePosted records one of the bot's posts or edits in channel.
func (a *Adapter) notePosted(channel, id string) {
	if id != "" {
		a.gaps.seen(channel, id)
	}
	a.gaps.touch(channel, a.now())
}

// fillGaps reads what was posted meanwhile in the channels the bot was
// active in (within Config.GapHorizon), and in those the session's
// GUILD_CREATEs (scan) show a recent message in, and queues it for
// delivery. It runs after a new session's READY, in the background. Live
// messages wait
// (holdLive): all of them until the channels to read are known, then only
// those of a channel still to be read, until its messages are queued, so
// each channel's lane gets them in Discord's order.
func (a *Adapter) fillGaps(ctx context.Context, scan *guildScan) {
	now := a.now()
	chans := a.gaps.due(now.Add(-a.cfg.GapHorizon), gapMaxChannels)
	if a.gapSource != nil {
		more, err := a.gapSource.GapChannels(ctx)
		if err != nil {
			// What this process saw is still read.
			a.log.Warn("discord: gap fill: the journal's channels are unreadable", "err", err)
		}
		chans = mergeGaps(chans, more, gapMaxChannels)
	}
	chans = a.listedGaps(ctx, scan, chans)
	left := a.gapListed(chans)
	defer a.gapAbandoned(left)
	// Nothing older than GapMaxAge is delivered, so nothing before it is
	// read: a channel last journaled days ago costs one short page.
	floor := snowflakeAt(now.Add(-a.cfg.GapMaxAge))
	work := make(chan GapChannel)
	var queued, stale atomic.Int64
	var wg sync.WaitGroup
	for range min(gapReaders, len(chans)) {
		wg.Go(func() {
			for c := range work {
				q, s := a.fillChannel(ctx, c, floor, now)
				queued.Add(int64(q))
				stale.Add(int64(s))
				left.done(c.Channel)
				a.gapQueued(c.Channel)
			}
		})
	}
	for _, c := range chans {
		select {
		case work <- c:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	a.gapFills.Add(1)
	a.log.Info("discord: gap fill after a new session", "channels", len(chans), "queued", queued.Load(), "too_old", stale.Load())
}

// fillChannel reads c after max(c.After, floor) and queues what is recent
// enough; it returns how many messages it queued and skipped as too old.
func (a *Adapter) fillChannel(ctx context.Context, c GapChannel, floor string, now time.Time) (queued, stale int) {
	after := c.After
	if snowflakeLess(after, floor) {
		after = floor
	}
	msgs, err := a.messagesAfter(ctx, c.Channel, after)
	if ctx.Err() != nil {
		return 0, 0
	}
	switch {
	case err == nil:
	case isCode(err, discordgo.ErrCodeUnknownChannel):
		// A thread the bot answered under was never opened (a slash
		// command's response), or the channel is gone: nothing to read.
		a.log.Debug("discord: gap fill: no such channel", "channel", c.Channel)
		return 0, 0
	case c.listed && (isCode(err, discordgo.ErrCodeMissingAccess) || isCode(err, discordgo.ErrCodeMissingPermissions)):
		// GUILD_CREATE lists channels the bot cannot read; it receives
		// nothing from them live either.
		a.log.Debug("discord: gap fill: a listed channel is not readable", "channel", c.Channel, "err", err)
	default:
		a.log.Warn("discord: gap fill: reading a channel failed", "channel", c.Channel, "err", err)
	}
	for _, m := range msgs {
		if m == nil || m.ID == "" || m.Author == nil {
			continue
		}
		if m.ChannelID == "" {
			m.ChannelID = c.Channel
		}
		at := m.Timestamp
		if at.IsZero() {
			at = snowflakeTime(m.ID)
		}
		if now.Sub(at) > a.cfg.GapMaxAge {
			// Too old to answer now; still the newest seen.
			a.gaps.seen(m.ChannelID, m.ID)
			stale++
			continue
		}
		a.enqueue(m.ChannelID, inbound{msg: m})
		queued++
	}
	return queued, stale
}

// snowflakeAt is the smallest Discord id minted at t (GET messages?after=
// takes any id).
func snowflakeAt(t time.Time) string {
	ms := t.UnixMilli() - discordEpoch
	if ms <= 0 {
		return ""
	}
	return strconv.FormatUint(uint64(ms)<<22, 10)
}

// mergeGaps adds more to chans (this process's, most active first): a
// channel in both is read after the newer id; the result holds at most n.
func mergeGaps(chans, more []GapChannel, n int) []GapChannel {
	at := make(map[string]int, len(chans))
	for i, c := range chans {
		at[c.Channel] = i
	}
	for _, c := range more {
		if !isSnowflake(c.Channel) || !isSnowflake(c.After) {
			continue // e.g. a routine's id as a run's trigger
		}
		if i, ok := at[c.Channel]; ok {
			if snowflakeLess(chans[i].After, c.After) {
				chans[i].After = c.After
			}
			continue
		}
		at[c.Channel] = len(chans)
		chans = append(chans, c)
	}
	return chans[:min(len(chans), n)]
}

// messagesAfter reads up to gapPages pages of channel's messages after id,
// oldest first.
func (a *Adapter) messagesAfter(ctx context.Context, channel, after string) ([]*discordgo.Message, error) {
	var out []*discordgo.Message
	for range gapPages {
		var page []*discordgo.Message
		err := a.pacer.send(ctx, routeRead, channel, core.PriorityEdit, "", func(ctx context.Context) error {
			var err error
			page, err = a.channelMessages(channel, 100, after, discordgo.WithContext(ctx))
			return err
		})
		if err != nil {
			return out, err
		}
		slices.SortFunc(page, func(x, y *discordgo.Message) int {
			if snowflakeLess(x.ID, y.ID) {
				return -1
			}
			return 1
		})
		out = append(out, page...)
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].ID
	}
	return out, nil
}

// liveHold is the live messages received while a gap fill has not queued
// what came before them in their channel.
type liveHold struct {
	mu      sync.Mutex
	wake    *sync.Cond     // broadcast when held items are released
	listing int            // gap fills still listing their channels: every channel waits
	pending map[string]int // channel → gap fills that have not queued it yet
	items   []heldInbound
	max     int // 0: maxHeld
	waiting int // live messages waiting for room (the gateway is not read)
}

type heldInbound struct {
	channel string
	it      inbound
}

// maxHeld bounds the live messages held back: past it the gateway is not
// read until the gap fill releases some (back-pressure, as for the lanes;
// never out of order).
const maxHeld = gatewayQueued

// gapReaders is how many channels one gap fill reads at once.
const gapReaders = 4

func (h *liveHold) initLocked() {
	if h.wake == nil {
		h.wake = sync.NewCond(&h.mu)
		h.pending = map[string]int{}
	}
}

// holdsLocked reports whether a live message of channel must wait.
func (h *liveHold) holdsLocked(channel string) bool {
	return h.listing > 0 || h.pending[channel] > 0
}

// holdLive starts holding every live message: called on READY (on the
// reading goroutine, so no later dispatch passes it), before the gap fill
// it starts.
func (a *Adapter) holdLive() {
	a.hold.mu.Lock()
	a.hold.initLocked()
	a.hold.listing++
	a.hold.mu.Unlock()
}

// enqueueLive queues a live message, or holds it while a gap fill has not
// queued its channel's gap. While the hold is full it waits.
func (a *Adapter) enqueueLive(channel string, it inbound) {
	h := &a.hold
	h.mu.Lock()
	h.initLocked()
	limit := cmp.Or(h.max, maxHeld)
	for h.holdsLocked(channel) && len(h.items) >= limit {
		h.waiting++
		h.wake.Wait()
		h.waiting--
	}
	if h.holdsLocked(channel) {
		h.items = append(h.items, heldInbound{channel, it})
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	// Nothing of channel is held (a release queues under h.mu), so this
	// follows whatever was.
	a.enqueue(channel, it)
}

// gapChannels tracks the channels one gap fill has yet to queue.
type gapChannels struct {
	mu   sync.Mutex
	left map[string]int
}

func (g *gapChannels) done(ch string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left[ch]--; g.left[ch] <= 0 {
		delete(g.left, ch)
	}
}

// gapListed ends a gap fill's listing: from now on only the live messages
// of chans wait, each until its channel's gap is queued (gapQueued).
func (a *Adapter) gapListed(chans []GapChannel) *gapChannels {
	left := &gapChannels{left: map[string]int{}}
	h := &a.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	h.initLocked()
	for _, c := range chans {
		h.pending[c.Channel]++
		left.left[c.Channel]++
	}
	h.listing--
	a.releaseLocked()
	return left
}

// gapQueued releases channel's live messages held for one gap fill.
func (a *Adapter) gapQueued(channel string) {
	h := &a.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending[channel]--; h.pending[channel] <= 0 {
		delete(h.pending, channel)
	}
	a.releaseLocked()
}

// gapAbandoned releases what a gap fill that stopped early (its context
// ended) still held.
func (a *Adapter) gapAbandoned(left *gapChannels) {
	left.mu.Lock()
	chs := left.left
	left.left = nil
	left.mu.Unlock()
	for ch, n := range chs {
		for range n {
			a.gapQueued(ch)
		}
	}
}

// releaseLive ends the hold of a gap fill that never ran.
func (a *Adapter) releaseLive() {
	a.gapListed(nil)
}

// releaseLocked queues, in arrival order, the held messages whose channel
// no longer waits. It queues under h.mu, so a live message of the same
// channel cannot pass them.
func (a *Adapter) releaseLocked() {
	h := &a.hold
	keep := h.items[:0]
	for _, it := range h.items {
		if h.holdsLocked(it.channel) {
			keep = append(keep, it)
			continue
		}
		a.enqueue(it.channel, it.it)
	}
	clear(h.items[len(keep):])
	h.items = keep
	h.wake.Broadcast()
}

// heldLive is how many live messages wait for a gap fill: held, and
// waiting for room in the hold.
func (a *Adapter) heldLive() (held, waiting int) {
	a.hold.mu.Lock()
	defer a.hold.mu.Unlock()
	return len(a.hold.items), a.hold.waiting
}
