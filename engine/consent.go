package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// Consent is asked once per scope: a grant covers one tool to one
// destination in one channel (the journal it lives in). Whether to ask is
// never a stored flag: the gate asks unless the channel's fold holds a grant
// that stands (consent.granted not followed by its consent.revoked).

// consentScope describes what an "Always allow" covers.
func consentScope(tool, dest string) string {
	if dest == "" {
		return tool + " (any destination) in this channel"
	}
	return tool + " to " + dest + " in this channel"
}

// grantRow is one grant with the channel it stands in.
type grantRow struct {
	ch core.ChannelKey
	g  fold.Grant
}

// grantsOf lists the standing grants person owns on platform, oldest first.
func (e *Engine) grantsOf(ctx context.Context, platform, person string) ([]grantRow, error) {
	return e.grantsIn(ctx, platform, person, e.eachItemChannel)
}

// grantsIn is grantsOf over the channels each visits.
func (e *Engine) grantsIn(ctx context.Context, platform, person string, each func(context.Context, string, func(*chanView)) error) ([]grantRow, error) {
	var out []grantRow
	err := each(ctx, platform, func(v *chanView) {
		for _, g := range v.fold.Grants() {
			if g.Owner == person {
				out = append(out, grantRow{v.key, *g})
			}
		}
	})
	slices.SortFunc(out, func(a, b grantRow) int { return a.g.At.Compare(b.g.At) })
	return out, err
}

// consentsText answers `consents`.
func (e *Engine) consentsText(ctx context.Context, platform string, p core.Person) (string, error) {
	rows, err := e.grantsOf(ctx, platform, p.ID)
	if err != nil {
		return "", err
	}
	if len(rows) == 0 {
		return "You have granted no standing consents. When I ask to do something on your behalf, \"Always allow\" keeps the answer for that tool and destination in that channel.", nil
	}
	var b strings.Builder
	b.WriteString("Your standing consents (revoke one with `consent revoke <id>`):")
	for _, r := range rows {
		sc, _ := core.ParseChannelKey(string(r.ch))
		fmt.Fprintf(&b, "\n• `%s` — %s in %s, since %s", r.g.ID, toolDest(r.g.Tool, r.g.Destination), channelRef(sc), r.g.At.UTC().Format("2006-01-02 15:04 UTC"))
	}
	return b.String(), nil
}

func toolDest(tool, dest string) string {
	if dest == "" {
		return tool + " (any destination)"
	}
	return tool + " to " + dest
}

// revokeConsent answers `consent revoke <id>`: the grant's owner or an
// admin of its channel may revoke it. The revocation is journaled in the
// grant's channel; from then on the gate asks again.
func (e *Engine) revokeConsentCmd(ctx context.Context, platform string, by core.Person, id string) (string, error) {
	id = strings.Trim(strings.TrimSpace(id), "`")
	if id == "" {
		return "Usage: `consent revoke <id>` — `consents` lists your grants and their ids.", nil
	}
	var found *grantRow
	var revoked bool
	// A revocation is journaled in its grant's channel: one with an item.
	err := e.eachItemChannel(ctx, platform, func(v *chanView) {
		if g := v.fold.Grant(id); g != nil && found == nil {
			found = &grantRow{v.key, *g}
		}
		if v.fold.Revoked(id) {
			revoked = true
		}
	})
	if err != nil {
		return "", err
	}
	if found == nil {
		if revoked {
			return "✅ Consent `" + id + "` is revoked; I'll ask again next time.", nil
		}
		return "I can't find a standing consent `" + id + "`. `consents` lists yours.", nil
	}
	v, err := e.channel(ctx, found.ch)
	if err != nil {
		return "", err
	}
	sc, _ := core.ParseChannelKey(string(found.ch))
	if found.g.Owner != by.ID {
		var pol core.Policy
		_ = v.with(ctx, func() { pol = e.policyLocked(v) })
		if !e.governs(ctx, sc, by, pol).admin {
			return "🚫 Only " + core.MentionOf(found.g.Owner) + ", who granted it, or an admin of that channel can revoke consent `" + id + "`. Nothing was changed.", nil
		}
	}
	d, err := e.b.Human(by, sc, core.Meta{}, &core.ConsentRevoked{ConsentID: id, Tool: found.g.Tool, Destination: found.g.Destination, Owner: found.g.Owner})
	if err != nil {
		return "", err
	}
	if _, err := v.append(ctx, func() error {
		if v.fold.Grant(id) == nil {
			return errCheckFailed
		}
		return nil
	}, d); err != nil && !errors.Is(err, errCheckFailed) {
		return "", err
	}
	e.log.InfoContext(ctx, "consent revoked", "consent", id, "channel", string(found.ch), "by", by.ID)
	return "✅ Revoked consent `" + id + "` (" + toolDest(found.g.Tool, found.g.Destination) + " in " + channelRef(sc) + "). I'll ask again next time.", nil
}

// channelRef is how a message names a channel.
func channelRef(sc core.Scope) string { return "<#" + sc.Channel + ">" }
