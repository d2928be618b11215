package fold

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// consentGrant is one standing grant, as the channel's fold keeps it.
type Grant struct {
	ID          string
	Tool        string
	Destination string
	Owner       string
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
	f.Consents[id] = &Grant{ID: id, Tool: p.Tool, Destination: p.Destination, Owner: p.Owner, At: c.At()}
}

// revokeConsent folds consent.revoked: by id, or (records without an id)
// every grant of the same tool and destination.
func (f *Channel) revokeConsent(p *core.ConsentRevoked) {
	if p.ConsentID != "" {
		if f.RevokedConsents == nil {
			f.RevokedConsents = map[string]bool{}
		}
		f.RevokedConsents[p.ConsentID] = true
		delete(f.Consents, p.ConsentID)
		return
	}
	for id, g := range f.Consents {
		if g.Tool == p.Tool && g.Destination == p.Destination {
			delete(f.Consents, id)
		}
	}
}

// consented reports a standing grant for tool to dest.
func (f *Channel) Consented(tool, dest string) bool {
	for _, g := range f.Consents {
		if g.Tool == tool && g.Destination == dest {
			return true
		}
	}
	return false
}
