package engine

import (
	"context"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// governance is who may change a channel's policy, as seen when someone asks
// to: known is false when nobody at all is known to administer the channel.
type governance struct {
	admin bool
	known bool
	// channelAdmins are the channel's own admins (policy set admins).
	channelAdmins []string
	// unverified: the platform could not say whether the person is an admin.
	unverified bool
}

// governs decides whether p administers the channel of sc: an operator
// named in configuration, one of the channel's admins set by policy, or an
// administrator the platform names (workspace admin or owner, guild
// administrator, chat administrator).
func (e *Engine) governs(ctx context.Context, sc core.Scope, p core.Person, pol core.Policy) governance {
	g := governance{channelAdmins: slices.Clone(pol.Admins)}
	for _, op := range e.cfg.Operators {
		if op.Platform == sc.Platform {
			g.known = true
			if op.UserID == p.ID {
				g.admin = true
			}
		}
	}
	if len(pol.Admins) > 0 {
		g.known = true
		if slices.Contains(pol.Admins, p.ID) {
			g.admin = true
		}
	}
	if g.admin {
		return g
	}
	if ad, ok := e.surfaces[sc.Platform].(core.Administrators); ok {
		lctx, cancel := context.WithTimeout(ctx, adminLookupTimeout)
		defer cancel()
		is, err := ad.IsAdmin(lctx, sc, p.ID)
		if err != nil {
			e.log.WarnContext(ctx, "could not ask the platform who administers the channel; treating the person as not an admin",
				"channel", sc.Key(), "user", p.ID, "err", err)
		}
		if err != nil {
			g.unverified = true
		} else {
			// A platform that answers has administrators (a workspace
			// always has an owner), whether or not this person is one.
			g.admin, g.known = is, true
		}
	}
	return g
}

// refusal is what a person who may not change the policy is told.
func (g governance) refusal() string {
	if len(g.channelAdmins) > 0 {
		return "🚫 Only this channel's admins (" + core.MentionList(g.channelAdmins) + ") or the workspace's administrators can change its policy. Nothing was changed."
	}
	if g.unverified {
		return "🚫 I couldn't check with the platform whether you administer this workspace, so it was refused. Nothing was changed; try again in a minute."
	}
	if g.known {
		return "🚫 Only an admin can change this channel's policy. Nothing was changed."
	}
	return "🚫 Nobody is an admin here yet, so the policy can't be changed. Nothing was changed.\n" +
		"An operator names admins with `MARLOWE_ADMINS=platform:userID` (e.g. `slack:U012ABC`) and restarts the bot; " +
		"workspace admins and owners count as admins too. An admin can then add channel admins with `policy set admins …`."
}

// adminLookupTimeout bounds the platform's answer to "is this person an
// admin": a slow platform must not hold the thread's run.
const adminLookupTimeout = 5 * time.Second
