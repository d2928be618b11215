package sandbox

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.RoomReader = (*Sandbox)(nil)

// CanRead implements core.RoomReader from the workspace's fixed layout: a
// DM is readable by its person only, a private channel by its members, a
// public channel by everyone; an unknown channel by nobody.
func (s *Sandbox) CanRead(_ context.Context, channel, user string) (bool, error) {
	c, ok := s.dir.channel(channel)
	if !ok {
		return false, nil
	}
	if c.Visibility == core.DM {
		return c.DMWith == user, nil
	}
	return c.member(user), nil
}
