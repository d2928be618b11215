package fold

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Approval is an approval as the engine's channel cache keeps it.
type Approval struct {
	ID          string
	Run         string
	Scope       core.Scope // the run's thread: where the card lives
	CallID      string
	Tool        string
	Consequence core.Consequence
	Requester   string
	Question    string
	Options     []string
	Destination string
	ExpiresAt   time.Time
	Notify      []string
	Unattended  bool
	InDM        bool   // asked in a direct message with the bot
	SignIn      string // waits for Requester to connect this server
	Pin         string // a changed connector definition put to the admins
	InDoubt     bool   // a connector call whose outcome is unknown: retry or skip
	RequestedAt time.Time
	Summary     string
	Reason      string
	Decision    string // "" while pending
	By          core.Person
	At          time.Time
}

func (a *Approval) Pending() bool { return a.Decision == "" }

// Consentable reports whether "Always allow" is offered: consents never
// cover irreversible actions or questions.
func (a *Approval) Consentable() bool { return a.Question == "" && a.Consequence != core.Irreversible }
