package fold

import (
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Grant is one standing grant, as the channel's fold keeps it.
type Grant struct {
	ID          string
	Tool        string
	Destination string
	Owner       string // who granted it
	Covers      string // core.CoversChannel, or "" in grants recorded before it
	At          time.Time
}

// grantConsent folds consent.granted: grants are keyed by consent id, so
// two grants of one tool and destination are two grants, each revoked by
// its own id.
func (f *Channel) grantConsent(c core.Command, p *core.ConsentGranted) {
	id := p.ConsentID
	if id == "" {
		id = c.ID() // grants recorded before consent ids
	}
	f.consents[id] = &Grant{ID: id, Tool: p.Tool, Destination: p.Destination, Owner: p.Owner, Covers: p.Covers, At: c.At()}
}

// revokeConsent folds consent.revoked: by id, or (records without an id)
// every grant of the same tool and destination.
func (f *Channel) revokeConsent(p *core.ConsentRevoked) {
	if p.ConsentID != "" {
		if f.revokedConsents == nil {
			f.revokedConsents = map[string]bool{}
		}
		f.revokedConsents[p.ConsentID] = true
		delete(f.consents, p.ConsentID)
		return
	}
	for id, g := range f.consents {
		if g.Tool == p.Tool && g.Destination == p.Destination {
			delete(f.consents, id)
		}
	}
}

// Consented reports a standing grant for tool to dest that covers the
// channel: one recorded as channel-wide (granted by an approver or admin),
// or one recorded before grants said what they cover whose granter is
// among approvers (the channel's approvers now).
func (f *Channel) Consented(tool, dest string, approvers []string) bool {
	for _, g := range f.consents {
		if g.Tool == tool && g.Destination == dest && (g.Covers == core.CoversChannel || slices.Contains(approvers, g.Owner)) {
			return true
		}
	}
	return false
}
