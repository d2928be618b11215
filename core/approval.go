package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EffectID is the deterministic id of the index-th effect requested by the
// command at seq in channel ch. It is the effect's idempotency key
// (Outbound.Key): a crash and resume re-issue the same key, and surfaces
// drop a key they have already performed.
func EffectID(ch ChannelKey, seq uint64, index int) string {
	h := sha256.New()
	h.Write([]byte(ch))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatUint(seq, 10)))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	return "fx" + hex.EncodeToString(h.Sum(nil)[:12])
}

// Default approval settings.
const (
	DefaultApprovalTTL = 24 * time.Hour
	maxTokenLen        = 64 // Telegram callback_data
)

// Card token actions. A question's options are '0'..'9'.
const (
	actionApprove = 'a'
	actionDecline = 'd'
	actionAlways  = 'A' // approve and keep a consent for the tool and destination
)

// cardToken signs (approval id, action): HMAC-SHA256 truncated to 128 bits,
// base64url. The token is all a click brings back, so it carries the id and
// action in the clear; the MAC makes it unforgeable and binds the action.
// A ULID id gives 26 + 1 + 1 + 22 = 50 bytes, within Telegram's 64.
func cardToken(key []byte, approvalID string, action byte) (string, error) {
	tok := approvalID + "." + string(action) + tokenMAC(key, approvalID, action)
	if len(tok) > maxTokenLen {
		return "", fmt.Errorf("card token for %q: %d bytes exceeds %d", approvalID, len(tok), maxTokenLen)
	}
	return tok, nil
}

func tokenMAC(key []byte, approvalID string, action byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("marlowe-card\x00"))
	m.Write([]byte(approvalID))
	m.Write([]byte{0, action})
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

var errBadToken = errors.New("card token does not verify")

// parseCardToken verifies a token and returns the approval id and action.
func parseCardToken(key []byte, tok string) (string, byte, error) {
	if len(tok) > maxTokenLen {
		return "", 0, errBadToken
	}
	i := strings.LastIndexByte(tok, '.')
	if i <= 0 || len(tok) < i+2 {
		return "", 0, errBadToken
	}
	id, action, mac := tok[:i], tok[i+1], tok[i+2:]
	want := tokenMAC(key, id, action)
	if !hmac.Equal([]byte(mac), []byte(want)) {
		return "", 0, errBadToken
	}
	return id, action, nil
}

// approvalView is an approval as the engine's channel cache keeps it.
type approvalView struct {
	ID          string
	Run         string
	Scope       Scope // the run's thread: where the card lives
	CallID      string
	Tool        string
	Consequence Consequence
	Requester   string
	Question    string
	Options     []string
	Destination string
	ExpiresAt   time.Time
	Notify      []string
	Unattended  bool
	RequestedAt time.Time
	Summary     string
	Reason      string
	Decision    string // "" while pending
	By          Person
	At          time.Time
}

func (a *approvalView) pending() bool { return a.Decision == "" }

// consentable reports whether "Always allow" is offered: consents never
// cover irreversible actions or questions.
func (a *approvalView) consentable() bool { return a.Question == "" && a.Consequence != Irreversible }

// authorizeClick decides whether by may take action on a. It returns a
// reason for a refusal, "" when allowed. The card is a view; this check,
// against the channel's policy, is what makes a click count.
func authorizeClick(p Policy, a *approvalView, by Person, action byte) string {
	if by.ID == "" || by.IsBot {
		return "only people can decide approvals"
	}
	isApprover := len(p.Approvers) == 0 || slices.Contains(p.Approvers, by.ID)
	if a.Question != "" {
		if isApprover || by.ID == a.Requester || slices.Contains(a.Notify, by.ID) {
			return ""
		}
		return fmt.Sprintf("only %s or the channel's approvers (%s) can answer this", mentionOf(a.Requester), mentionList(p.Approvers))
	}
	switch action {
	case actionDecline:
		if isApprover || by.ID == a.Requester {
			return ""
		}
		return fmt.Sprintf("only the requester or the channel's approvers (%s) can decline this", mentionList(p.Approvers))
	case actionApprove, actionAlways:
		if a.Unattended && a.Consequence != Irreversible {
			// Consent for a run done on the owner's behalf is the owner's.
			if by.ID == a.Requester || len(p.Approvers) > 0 && slices.Contains(p.Approvers, by.ID) {
				return ""
			}
			return "only " + mentionOf(a.Requester) + ", on whose behalf this runs, can allow it"
		}
		if !isApprover {
			return fmt.Sprintf("only the channel's approvers (%s) can approve this", mentionList(p.Approvers))
		}
		if a.Consequence == Irreversible && by.ID == a.Requester {
			return "an irreversible action needs someone other than the requester to approve it"
		}
		return ""
	}
	return "unknown action"
}

func mentionOf(id string) string {
	if id == "" {
		return "the requester"
	}
	return "<@" + id + ">"
}

func mentionList(ids []string) string {
	if len(ids) == 0 {
		return "anyone in the channel"
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = mentionOf(id)
	}
	return strings.Join(out, ", ")
}

// approvalCard renders the card of an approval or question. It is a pure
// function of the journaled request (and resolution), so a re-render after
// a restart is identical and carries the same tokens.
func approvalCard(key []byte, ar *ApprovalRequested, res *ApprovalResolved, resAt time.Time) (*Card, error) {
	c := &Card{ID: ar.ApprovalID}
	if ar.Question != "" {
		c.Title = "❓ " + ar.Question
		c.Body = ar.Summary
		c.Fields = []CardField{{Label: "Asked for", Value: mentionOf(ar.Requester)}}
		opts := ar.Options
		if len(opts) == 0 {
			opts = []string{"Yes", "No"}
		}
		for i, o := range opts {
			tok, err := cardToken(key, ar.ApprovalID, byte('0'+i))
			if err != nil {
				return nil, err
			}
			c.Actions = append(c.Actions, CardAction{ID: fmt.Sprintf("option-%d", i), Label: truncate(o, 70), Token: tok})
		}
	} else {
		c.Title = "🔐 Approval needed: " + ar.Tool
		c.Body = ar.Summary
		c.Fields = []CardField{
			{Label: "Consequence", Value: ar.Consequence},
			{Label: "Why", Value: ar.Reason},
			{Label: "Requested by", Value: mentionOf(ar.Requester)},
			{Label: "Expires", Value: ar.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")},
		}
		if ar.Destination != "" {
			c.Fields = slices.Insert(c.Fields, 1, CardField{Label: "Destination", Value: ar.Destination})
		}
		approve, err := cardToken(key, ar.ApprovalID, actionApprove)
		if err != nil {
			return nil, err
		}
		decline, err := cardToken(key, ar.ApprovalID, actionDecline)
		if err != nil {
			return nil, err
		}
		c.Actions = []CardAction{
			{ID: "approve", Label: "Approve", Token: approve, Style: "primary"},
			{ID: "decline", Label: "Decline", Token: decline, Style: "danger"},
		}
		if Consequence(ar.Consequence) != Irreversible {
			// Consent, asked once per scope: Allow once / Always allow / Deny.
			always, err := cardToken(key, ar.ApprovalID, actionAlways)
			if err != nil {
				return nil, err
			}
			c.Actions = []CardAction{
				{ID: "approve", Label: "Allow once", Token: approve, Style: "primary"},
				{ID: "always", Label: "Always allow", Token: always},
				{ID: "decline", Label: "Deny", Token: decline, Style: "danger"},
			}
			c.Fields = append(c.Fields, CardField{Label: "Always allow covers", Value: consentScope(ar.Tool, ar.Destination)})
		}
	}
	if res != nil {
		c.Actions = nil
		c.Resolution = resolutionText(res, resAt)
	}
	return c, nil
}

func resolutionText(res *ApprovalResolved, at time.Time) string {
	who := res.By.Name
	if who == "" && res.By.ID != "" {
		who = mentionOf(res.By.ID)
	}
	when := at.UTC().Format("2006-01-02 15:04 UTC")
	switch res.Decision {
	case "approved":
		return fmt.Sprintf("✅ Approved by %s at %s", who, when)
	case "declined":
		return fmt.Sprintf("🚫 Declined by %s at %s", who, when)
	case "expired":
		return fmt.Sprintf("⌛ Expired at %s — nothing was done", when)
	case "superseded":
		return fmt.Sprintf("↪️ Superseded by a newer message from %s at %s — nothing was done", who, when)
	case "answered":
		return fmt.Sprintf("💬 %s answered %q at %s", who, res.Choice, when)
	}
	return fmt.Sprintf("%s by %s at %s", res.Decision, who, when)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
