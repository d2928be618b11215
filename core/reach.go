package core

import (
	"context"
	"errors"
	"fmt"
)

// RoomReader is an optional Surface capability: whether a person can read
// a room now, asked of the platform (Slack: the conversation's members, or
// any full member for a public channel; Discord: VIEW_CHANNEL from the
// member's roles and the channel's permission overwrites, a DM's
// recipients; Telegram: getChatMember). A DM is readable only by its own
// person. An implementation may cache an answer only until a membership
// event could change it. An unknown room is not readable.
type RoomReader interface {
	CanRead(ctx context.Context, channel, userID string) (bool, error)
}

// SurfaceWrapper is a Surface that stands in for another: the engine's
// surface for a running tool, which journals the tool's posts. It promotes
// only Surface's methods, so the optional capabilities the rule asks
// (RoomReader, MembershipChecker, Rooms) are the wrapped surface's.
type SurfaceWrapper interface {
	Unwrap() Surface
}

// Unwrap is the surface s stands in for, through every SurfaceWrapper: the
// platform's own adapter, which the reachability rule asks. Without it a
// tool's check when it runs asked a surface with none of the capabilities,
// and every room passed.
func Unwrap(s Surface) Surface {
	for {
		w, ok := s.(SurfaceWrapper)
		if !ok {
			return s
		}
		s = w.Unwrap()
	}
}

// ErrUnreachable is the refusal of a room the person asking cannot read.
// It names no room: whether the room exists, and what it is called, are
// not the requester's to learn from the bot.
var ErrUnreachable = errors.New("you cannot read that room now, and I only post where the person asking can read; nothing was sent")

// CanReadNow reports whether userID can read channel now, on s. A surface
// that implements RoomReader is asked; one with only MembershipChecker
// (chat membership) is asked that. A surface with only Rooms cannot tell
// membership: a channel in a workspace is taken as readable by members of
// that workspace, and a DM (no workspace) by nobody, so one DM never
// reaches another. A surface with none of these (a test fake) is not
// asked. Every platform adapter, the sandbox included, is a RoomReader.
func CanReadNow(ctx context.Context, s Surface, channel, userID string) (bool, error) {
	s = Unwrap(s)
	if channel == "" || userID == "" {
		return false, nil
	}
	switch r := s.(type) {
	case RoomReader:
		return r.CanRead(ctx, channel, userID)
	case MembershipChecker:
		return r.IsMember(ctx, channel, userID)
	case Rooms:
		ws, err := r.ChannelWorkspace(ctx, channel)
		if err != nil || ws == "" {
			return false, err
		}
		return r.UserInWorkspace(ctx, ws, userID)
	}
	return true, nil
}

// CheckReach is the one reachability rule for anything that acts in a
// room on a person's behalf (post_to_channel, a routine's run, a
// connector that posts): the room must be one the requester can read
// now. The room the request was made in is readable by its requester
// (they just wrote there). Any other room must be in the request's own
// workspace, where the platform has them, and is asked of the platform
// (CanReadNow); a failed check refuses too. The refusal is ErrUnreachable,
// which names no room.
func CheckReach(ctx context.Context, s Surface, from Scope, requester, channel string) error {
	s = Unwrap(s)
	if channel != "" && channel == from.Channel {
		return nil
	}
	if r, ok := s.(Rooms); ok {
		// On a platform with workspaces the bot also stays within the
		// request's own: channel ids may be global (Discord), and a DM
		// (no workspace) reaches no other room.
		ws, err := r.ChannelWorkspace(ctx, channel)
		if err != nil {
			return fmt.Errorf("%w (the check failed)", ErrUnreachable)
		}
		if ws == "" || ws != from.Workspace {
			return ErrUnreachable
		}
	}
	ok, err := CanReadNow(ctx, s, channel, requester)
	if err != nil {
		return fmt.Errorf("%w (the check failed)", ErrUnreachable)
	}
	if !ok {
		return ErrUnreachable
	}
	return nil
}

// ErrPersonUnreachable is the refusal of a person outside the requester's
// own workspace (or, where there is none, chat).
var ErrPersonUnreachable = errors.New("they are not in the workspace (or chat) this request was made in, and I write only to people there; nothing was sent")

// CheckPersonReach is the rule for anything that writes to a person on
// the requester's behalf (dm_person, a connector that messages someone):
// on a platform with workspaces, the person must be in the request's
// workspace; on one without (Telegram), a member of the request's chat. A
// failed check refuses. A surface with neither is not asked.
func CheckPersonReach(ctx context.Context, s Surface, from Scope, userID string) error {
	var in bool
	var err error
	switch r := Unwrap(s).(type) {
	case MembershipChecker:
		in, err = r.IsMember(ctx, from.Channel, userID)
	case Rooms:
		if from.Workspace == "" {
			return ErrPersonUnreachable
		}
		in, err = r.UserInWorkspace(ctx, from.Workspace, userID)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w (the check failed)", ErrPersonUnreachable)
	}
	if !in {
		return ErrPersonUnreachable
	}
	return nil
}
