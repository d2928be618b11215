// Package redis implements Marlowe's shared, multi-replica state on Redis
// (go-redis/v9). This file is the intent WindowStore: TTL keys, one round
// trip per read, windows that are only ever extended (Lua), safe across
// replicas.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// Keys (P = the prefix given at construction, N = len(channel key) in bytes,
// so that no channel/thread pair can collide with another):
//
//	P w:N:{channel}:top        "<at ms>:<until ms>:<person>"  PXAT until
//	P w:N:{channel}:t:<thread> "<until ms>"                   PXAT until
//
// The {channel} hash tag keeps a channel's keys in one cluster slot, so the
// MGET of Windows is one round trip in a cluster too.

// extendThreadLua sets the thread window to ARGV[1] (unix ms) unless the stored
// one is later: windows are extended, never shortened.
const extendThreadLua = `
local u = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '') or 0
if u <= cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[1])
return 1
`

// setToplevelLua gives the channel's top-level window to ARGV[3] from ARGV[1]
// (answer time, ms) until ARGV[2] (ms), unless the stored window records a
// more recent answer. ARGV[4] is the caller's now: a window already over
// closes the channel's window.
const setToplevelLua = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local at = tonumber(string.match(cur, '^(-?%d+):'))
  if at and tonumber(ARGV[1]) < at then return 0 end
end
if tonumber(ARGV[2]) <= tonumber(ARGV[4]) then
  redis.call('DEL', KEYS[1])
  return 2
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3], 'PXAT', ARGV[2])
return 1
`

// WindowStore is the Redis intent.WindowStore.
type WindowStore struct {
	rdb    goredis.UniversalClient
	prefix string

	extendThread *goredis.Script
	setToplevel  *goredis.Script
}

var _ intent.WindowStore = (*WindowStore)(nil)

// NewWindowStore returns a window store on rdb whose keys all start with
// prefix (e.g. "marlowe:"). Windows expire by Redis's clock (PXAT); this
// process's clock only decides which are already over and not worth writing.
func NewWindowStore(rdb goredis.UniversalClient, prefix string) *WindowStore {
	return &WindowStore{
		rdb: rdb, prefix: prefix,
		extendThread: goredis.NewScript(extendThreadLua),
		setToplevel:  goredis.NewScript(setToplevelLua),
	}
}

func (s *WindowStore) channelBase(ch core.ChannelKey) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(ch) + 16)
	b.WriteString(s.prefix)
	b.WriteString("w:")
	b.WriteString(strconv.Itoa(len(ch)))
	b.WriteString(":{")
	b.WriteString(string(ch))
	b.WriteString("}:")
	return b.String()
}

func (s *WindowStore) topKey(ch core.ChannelKey) string { return s.channelBase(ch) + "top" }

func (s *WindowStore) threadKey(ch core.ChannelKey, thread string) string {
	return s.channelBase(ch) + "t:" + thread
}

// Windows implements intent.WindowStore with one MGET.
func (s *WindowStore) Windows(ctx context.Context, ch core.ChannelKey, thread string) (intent.Windows, error) {
	var w intent.Windows
	base := s.channelBase(ch)
	keys := make([]string, 1, 2)
	keys[0] = base + "top"
	if thread != "" {
		keys = append(keys, base+"t:"+thread)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return w, fmt.Errorf("redis windows %s: %w", ch, err)
	}
	if len(vals) != len(keys) {
		return w, fmt.Errorf("redis windows %s: got %d values for %d keys", ch, len(vals), len(keys))
	}
	if v, ok := vals[0].(string); ok {
		top, err := parseToplevel(v)
		if err != nil {
			return w, fmt.Errorf("redis windows %s: top-level: %w", ch, err)
		}
		w.Toplevel = top
	}
	if thread != "" {
		if v, ok := vals[1].(string); ok {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return w, fmt.Errorf("redis windows %s: thread %q: corrupt value %q", ch, thread, v)
			}
			w.ThreadUntil = time.UnixMilli(ms).UTC()
		}
	}
	return w, nil
}

func parseToplevel(v string) (intent.Toplevel, error) {
	atS, rest, ok1 := strings.Cut(v, ":")
	untilS, person, ok2 := strings.Cut(rest, ":")
	at, err1 := strconv.ParseInt(atS, 10, 64)
	until, err2 := strconv.ParseInt(untilS, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return intent.Toplevel{}, fmt.Errorf("corrupt value %q", v)
	}
	return intent.Toplevel{Person: person, At: time.UnixMilli(at).UTC(), Until: time.UnixMilli(until).UTC()}, nil
}

// ExtendThread implements intent.WindowStore (atomic, never shortens).
func (s *WindowStore) ExtendThread(ctx context.Context, ch core.ChannelKey, thread string, until time.Time) error {
	if !time.Now().Before(until) {
		return nil
	}
	err := s.extendThread.Run(ctx, s.rdb, []string{s.threadKey(ch, thread)}, until.UnixMilli()).Err()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis extend thread window %s/%s: %w", ch, thread, err)
	}
	return nil
}

// SetToplevel implements intent.WindowStore (atomic; the most recent answer wins).
func (s *WindowStore) SetToplevel(ctx context.Context, ch core.ChannelKey, w intent.Toplevel) error {
	now := time.Now()
	err := s.setToplevel.Run(ctx, s.rdb, []string{s.topKey(ch)},
		w.At.UnixMilli(), w.Until.UnixMilli(), w.Person, now.UnixMilli()).Err()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis set top-level window %s: %w", ch, err)
	}
	return nil
}
