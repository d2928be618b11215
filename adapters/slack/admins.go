package slack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// adminTTL is how long a users.info answer about admin rights is trusted: a
// demoted admin keeps governing for at most this long.
const adminTTL = 5 * time.Minute

var _ core.Administrators = (*Adapter)(nil)

// IsAdmin implements core.Administrators: workspace admins and owners
// (users.info is_admin, is_owner, is_primary_owner) administer every
// channel. Deleted accounts, guests and bots never do. Answers are cached
// per user for adminTTL; errors are not cached.
func (a *Adapter) IsAdmin(ctx context.Context, scope core.Scope, userID string) (bool, error) {
	if scope.Platform != "" && scope.Platform != Platform {
		return false, fmt.Errorf("slack: scope platform %q is not %q", scope.Platform, Platform)
	}
	if !isSlackID(userID) {
		return false, errors.New("slack: is admin: not a Slack user id")
	}
	key := scope.Workspace + "/" + userID
	now := a.now()
	if v, ok := a.admins.get(key, now); ok {
		return v, nil
	}
	u, err := a.userInfo(ctx, userID)
	if err != nil {
		return false, fmt.Errorf("slack: users.info: %w", err)
	}
	admin := (u.IsAdmin || u.IsOwner || u.IsPrimaryOwner) &&
		!u.Deleted && !u.IsBot && !u.IsRestricted && !u.IsUltraRestricted
	a.admins.put(key, admin, now)
	return admin, nil
}

// adminCache is a bounded map of recent answers (reset when full, like
// visCache).
type adminCache struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	m   map[string]adminEntry
}

type adminEntry struct {
	admin bool
	at    time.Time
}

func newAdminCache(ttl time.Duration, max int) *adminCache {
	return &adminCache{ttl: ttl, max: max, m: map[string]adminEntry{}}
}

func (c *adminCache) get(key string, now time.Time) (bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || now.Sub(e.at) >= c.ttl || now.Before(e.at) {
		return false, false
	}
	return e.admin, true
}

func (c *adminCache) put(key string, admin bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = adminEntry{admin: admin, at: now}
}
