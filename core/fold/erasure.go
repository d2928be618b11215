package fold

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Erasure is a `forget me` request as the fold of the DM it was asked in
// keeps it: who asked, whose texts, until when the card may be confirmed,
// and its one resolution (the first stands).
type Erasure struct {
	ID        string
	CmdID     string // the erasure.requested command
	Person    string // whose texts
	By        core.Person
	ExpiresAt time.Time
	Decision  string // "" while pending; confirmed | cancelled | expired
	DecidedBy core.Person
	DecidedAt time.Time
}

// Pending reports whether the request awaits its card's click.
func (e *Erasure) Pending() bool { return e.Decision == "" }

// Erasure returns the erasure request id, or nil.
func (f *Channel) Erasure(id string) *Erasure {
	if e := f.erasures[id]; e != nil {
		c := *e
		return &c
	}
	return nil
}

func (f *Channel) requestErasure(c core.Command, p *core.ErasureRequested) {
	if f.erasures[p.ErasureID] != nil {
		return // the first request stands
	}
	f.erasures[p.ErasureID] = &Erasure{ID: p.ErasureID, CmdID: c.ID(), Person: p.Person,
		By: core.Person{ID: c.Actor().ID}, ExpiresAt: p.ExpiresAt}
}

func (f *Channel) resolveErasure(c core.Command, p *core.ErasureResolved) {
	if e := f.erasures[p.ErasureID]; e != nil && e.Pending() {
		e.Decision, e.DecidedBy, e.DecidedAt = p.Decision, p.By, c.At()
	}
}
