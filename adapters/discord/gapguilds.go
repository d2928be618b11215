package discord

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Gap fill from GUILD_CREATE. The journal names only channels the bot
// talked in; a first mention in a channel new to it, sent while no
// session existed, is in none of them. After READY Discord sends a
// GUILD_CREATE for each guild READY listed, with every channel's and
// active thread's last_message_id, a snowflake, so the time its last
// message was sent. A new session's gap fill waits for those (at most
// Config.GapGuildWait) and also reads each text channel or thread whose
// last message is newer than the thread window (Config.GapMaxAge: older
// is never delivered), newest first, at most gapMaxListed. DMs are in no
// GUILD_CREATE, so a first DM sent while no session existed is not read.

// gapMaxListed bounds the channels one gap fill reads because GUILD_CREATE
// shows a recent message there, besides those already named.
const gapMaxListed = 100

// guildScan collects, for one new session, the guild channels whose last
// message is newer than floor, from the GUILD_CREATEs of the guilds READY
// listed.
type guildScan struct {
	mu      sync.Mutex
	floor   string
	waiting map[string]bool   // guild ids READY listed, not created yet
	found   map[string]string // channel → its last_message_id
	done    chan struct{}     // closed when waiting is empty or the fill stopped waiting
	over    bool
}

func newGuildScan(guilds []string, floor string) *guildScan {
	s := &guildScan{floor: floor, waiting: map[string]bool{}, found: map[string]string{}, done: make(chan struct{})}
	for _, g := range guilds {
		if g != "" {
			s.waiting[g] = true
		}
	}
	if len(s.waiting) == 0 {
		s.endLocked()
	}
	return s
}

func (s *guildScan) endLocked() {
	if !s.over {
		s.over = true
		close(s.done)
	}
}

// add takes one GUILD_CREATE: its text channels and active threads with a
// message newer than floor. A guild READY did not list (joined since)
// had no gap.
func (s *guildScan) add(g *discordgo.Guild) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over || g.Unavailable || !s.waiting[g.ID] {
		return
	}
	delete(s.waiting, g.ID)
	for _, c := range slices.Concat(g.Channels, g.Threads) {
		if c == nil || !holdsMessages(c.Type) || !isSnowflake(c.ID) || !isSnowflake(c.LastMessageID) {
			continue
		}
		if snowflakeLess(s.floor, c.LastMessageID) {
			s.found[c.ID] = c.LastMessageID
		}
	}
	if len(s.found) > 4*gapMaxListed {
		// Only the newest gapMaxListed are read: keep memory bounded on a
		// bot in thousands of busy guilds.
		for _, c := range s.listLocked()[gapMaxListed:] {
			delete(s.found, c.Channel)
		}
	}
	if len(s.waiting) == 0 {
		s.endLocked()
	}
}

// listLocked is found, newest last message first.
func (s *guildScan) listLocked() []GapChannel {
	out := make([]GapChannel, 0, len(s.found))
	for ch := range s.found {
		out = append(out, GapChannel{Channel: ch, listed: true})
	}
	slices.SortFunc(out, func(a, b GapChannel) int {
		x, y := s.found[a.Channel], s.found[b.Channel]
		switch {
		case snowflakeLess(y, x):
			return -1
		case snowflakeLess(x, y):
			return 1
		}
		return 0
	})
	return out
}

// wait returns, once every guild READY listed has been created or after
// d, the channels found, newest message first, at most n, and how many
// guilds never came (unavailable, or the gateway was not read).
func (s *guildScan) wait(ctx context.Context, d time.Duration, n int) (chans []GapChannel, missing int) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked()
	chans = s.listLocked()
	return chans[:min(len(chans), n)], len(s.waiting)
}

// holdsMessages reports whether a guild channel of type t has messages of
// its own (a forum's or media channel's are in its threads, a category
// has none).
func holdsMessages(t discordgo.ChannelType) bool {
	switch t {
	case discordgo.ChannelTypeGuildText, discordgo.ChannelTypeGuildNews,
		discordgo.ChannelTypeGuildVoice, discordgo.ChannelTypeGuildStageVoice,
		discordgo.ChannelTypeGuildNewsThread, discordgo.ChannelTypeGuildPublicThread,
		discordgo.ChannelTypeGuildPrivateThread:
		return true
	}
	return false
}

// scanGuilds starts collecting, for the gap fill of the session whose
// READY listed guilds, the channels GUILD_CREATE shows a recent message
// in. Called on READY, on the reading goroutine, before any of them.
func (a *Adapter) scanGuilds(guilds []string) *guildScan {
	s := newGuildScan(guilds, snowflakeAt(a.now().Add(-a.cfg.GapMaxAge)))
	if old := a.guildScan.Swap(s); old != nil {
		// A newer session's READY: the older fill stops waiting.
		old.mu.Lock()
		old.endLocked()
		old.mu.Unlock()
	}
	return s
}

// gapGuild hands a GUILD_CREATE to the scan of a gap fill still waiting.
func (a *Adapter) gapGuild(g *discordgo.Guild) {
	if s := a.guildScan.Load(); s != nil {
		s.add(g)
	}
}

// listedGaps waits for the scan's GUILD_CREATEs and adds the channels
// they show a recent message in to chans, after them, unless already
// there.
func (a *Adapter) listedGaps(ctx context.Context, s *guildScan, chans []GapChannel) []GapChannel {
	if s == nil {
		return chans
	}
	listed, missing := s.wait(ctx, a.cfg.GapGuildWait, gapMaxListed+len(chans))
	a.guildScan.CompareAndSwap(s, nil)
	if missing > 0 && ctx.Err() == nil {
		a.log.Info("discord: gap fill: guilds not created in time; their channels are read only if named", "guilds", missing, "waited", a.cfg.GapGuildWait)
	}
	named := make(map[string]bool, len(chans))
	for _, c := range chans {
		named[c.Channel] = true
	}
	added := 0
	for _, c := range listed {
		if added == gapMaxListed {
			break
		}
		if !named[c.Channel] {
			chans = append(chans, c)
			added++
		}
	}
	return chans
}
