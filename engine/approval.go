package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

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

// clicker is who clicked a card, and where: admin is whether they
// administer the approval's channel (an operator, a channel admin, a
// platform administrator), from is the conversation the click came from.
type clicker struct {
	by    core.Person
	admin bool
	from  core.Scope
}

// clickerOf asks, before the channel's append (it is I/O), whether the
// person who clicked a's card administers a's channel.
func (e *Engine) clickerOf(ctx context.Context, v *chanView, a *fold.Approval, click core.CardClick) clicker {
	var pol core.Policy
	_ = v.with(ctx, func() { pol = e.policyLocked(v) })
	return clicker{by: click.By, from: click.Scope, admin: e.governs(ctx, a.Scope, click.By, pol).admin}
}

// authorizeClick decides whether c may take action on a. It returns a
// reason for a refusal, "" when allowed. The card is a view; this check,
// against the channel's policy, is what makes a click count:
//   - with approvers listed, they decide;
//   - with none, the admins alone decide an irreversible action or one
//     asked in a DM, and anyone else decides from the card's own
//     conversation (a DM card or a forwarded token decides nothing);
//   - the requester alone never approves an irreversible action;
//   - an unattended run's owner may allow its non-irreversible call once,
//     or deny it;
//   - "Always allow" covers every run in the channel, so only its approvers
//     (when listed) or admins grant it.
func authorizeClick(p core.Policy, a *fold.Approval, c clicker, action byte) string {
	by := c.by
	if by.ID == "" || by.IsBot {
		return "only people can decide approvals"
	}
	listed := slices.Contains(p.Approvers, by.ID)
	deciders := core.MentionList(p.Approvers)
	if len(p.Approvers) == 0 {
		deciders = "the channel's admins"
	}
	var decider bool
	switch {
	case len(p.Approvers) > 0:
		decider = listed
	case a.Consequence == core.Irreversible || a.InDM:
		decider = c.admin
	default:
		// Members decide, from the card's own conversation.
		decider = c.admin || c.from.Key() == a.Scope.Key()
		deciders = "people in " + channelRef(a.Scope)
	}
	if a.SignIn != "" {
		// Only the sign-in resolves it (in the requester's name); the
		// card's one button cancels, for the requester or an admin.
		if action == actionDecline && (by.ID == a.Requester || c.admin) {
			return ""
		}
		return "only " + core.MentionOf(a.Requester) + " can cancel this; it continues when they connect " + a.SignIn
	}
	if a.Pin != "" {
		// Accepting what a server now says a tool is belongs to the
		// channel's governance: admins only, never the requester alone.
		if c.admin {
			return ""
		}
		return "only the channel's admins can accept a connector's changed tool definition"
	}
	if a.InDoubt && a.Consequence == core.Irreversible {
		// Sending an irreversible call again is a second irreversible
		// action: as with its approval, never the requester alone.
		if decider && by.ID != a.Requester {
			return ""
		}
		return fmt.Sprintf("only %s, other than the requester, can decide whether to send an irreversible action again", deciders)
	}
	if a.Question != "" {
		if decider || by.ID == a.Requester || slices.Contains(a.Notify, by.ID) {
			return ""
		}
		return fmt.Sprintf("only %s or %s can answer this", core.MentionOf(a.Requester), deciders)
	}
	switch action {
	case actionDecline:
		if decider || by.ID == a.Requester {
			return ""
		}
		return fmt.Sprintf("only %s or %s can decline this", core.MentionOf(a.Requester), deciders)
	case actionAlways:
		if !(len(p.Approvers) > 0 && listed) && !c.admin {
			who := "the channel's admins"
			if len(p.Approvers) > 0 {
				who = core.MentionList(p.Approvers) + " or the channel's admins"
			}
			return "only " + who + " can grant \"Always allow\" (it covers everyone's runs in this channel); " +
				"\"Allow once\" is still yours to give"
		}
		fallthrough
	case actionApprove:
		if a.Unattended && a.Consequence != core.Irreversible {
			// Consent for a run done on the owner's behalf is the owner's.
			if by.ID == a.Requester || listed {
				return ""
			}
			return "only " + core.MentionOf(a.Requester) + ", on whose behalf this runs, can allow it"
		}
		if a.Consequence == core.Irreversible && by.ID == a.Requester {
			return "an irreversible action needs someone other than the requester to approve it"
		}
		if !decider {
			return fmt.Sprintf("only %s can approve this", deciders)
		}
		return ""
	}
	return "unknown action"
}

// refusalText is what the clicker is told when authorizeClick refused:
// who may decide, and that the request still waits (a refusal reads as a
// failure otherwise, and the request was not dropped).
func refusalText(why string) string {
	if why == "" {
		return ""
	}
	waits := "it is still waiting for them"
	if !strings.HasPrefix(why, "only ") {
		waits = "it is still waiting for a decision"
	}
	return "🚫 " + strings.ToUpper(why[:1]) + why[1:] + "; " + waits + ". Your click changed nothing."
}

// approvalCard renders the card of an approval or question. It is a pure
// function of the journaled request (and resolution), so a re-render after
// a restart is identical and carries the same tokens.
func approvalCard(key []byte, ar *core.ApprovalRequested, res *core.ApprovalResolved, resAt time.Time) (*core.Card, error) {
	c := &core.Card{ID: ar.ApprovalID}
	if ar.SignIn != "" {
		c.Title = "🔌 Waiting for " + core.MentionOf(ar.Requester) + " to connect " + ar.SignIn
		c.Body = ar.Summary
		c.Fields = []core.CardField{
			{Label: "Runs as", Value: core.MentionOf(ar.Requester) + "'s own " + ar.SignIn + " account"},
			{Label: "Sign-in link", Value: "sent to " + core.MentionOf(ar.Requester) + " alone, in a direct message"},
			{Label: "Expires", Value: ar.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")},
		}
		decline, err := cardToken(key, ar.ApprovalID, actionDecline)
		if err != nil {
			return nil, err
		}
		c.Actions = []core.CardAction{{ID: "decline", Label: "Cancel", Token: decline}}
		if res != nil {
			c.Actions = nil
			c.Resolution = resolutionText(res, resAt)
			if res.Decision == "approved" {
				c.Resolution = fmt.Sprintf("🔌 %s connected %s at %s", core.MentionOf(res.By.ID), ar.SignIn, resAt.UTC().Format("2006-01-02 15:04 UTC"))
			}
		}
		return c, nil
	}
	if ar.Question != "" {
		c.Title = "❓ " + ar.Question
		c.Body = ar.Summary
		c.Fields = []core.CardField{{Label: "Asked for", Value: core.MentionOf(ar.Requester)}}
		opts := ar.Options
		if len(opts) == 0 {
			opts = []string{"Yes", "No"}
		}
		for i, o := range opts {
			tok, err := cardToken(key, ar.ApprovalID, byte('0'+i))
			if err != nil {
				return nil, err
			}
			c.Actions = append(c.Actions, core.CardAction{ID: fmt.Sprintf("option-%d", i), Label: core.Truncate(o, 70), Token: tok})
		}
	} else {
		c.Title = "🔐 Approval needed: " + ar.Tool
		c.Body = ar.Summary
		c.Fields = []core.CardField{
			{Label: "Consequence", Value: ar.Consequence},
			{Label: "Why", Value: ar.Reason},
			{Label: "Requested by", Value: core.MentionOf(ar.Requester)},
			{Label: "Expires", Value: ar.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")},
		}
		if ar.ActsAs != "" {
			c.Fields = append(c.Fields, core.CardField{Label: "Runs as", Value: core.MentionOf(ar.ActsAs) + "'s own account (approving does not lend yours)"})
		} else if ar.SharedAccount != "" {
			c.Fields = append(c.Fields, core.CardField{Label: "Runs as", Value: "the bot's shared " + ar.SharedAccount + " credentials, the same for everyone"})
		}
		if ar.Destination != "" {
			c.Fields = slices.Insert(c.Fields, 1, core.CardField{Label: "Destination", Value: ar.Destination})
		}
		approve, err := cardToken(key, ar.ApprovalID, actionApprove)
		if err != nil {
			return nil, err
		}
		decline, err := cardToken(key, ar.ApprovalID, actionDecline)
		if err != nil {
			return nil, err
		}
		c.Actions = []core.CardAction{
			{ID: "approve", Label: "Approve", Token: approve, Style: "primary"},
			{ID: "decline", Label: "Decline", Token: decline, Style: "danger"},
		}
		if core.Consequence(ar.Consequence) != core.Irreversible {
			// Consent, asked once per scope: Allow once / Always allow / Deny.
			always, err := cardToken(key, ar.ApprovalID, actionAlways)
			if err != nil {
				return nil, err
			}
			c.Actions = []core.CardAction{
				{ID: "approve", Label: "Allow once", Token: approve, Style: "primary"},
				{ID: "always", Label: "Always allow", Token: always},
				{ID: "decline", Label: "Deny", Token: decline, Style: "danger"},
			}
			c.Fields = append(c.Fields, core.CardField{Label: "Always allow covers", Value: consentScope(ar.Tool, ar.Destination) +
				", for everyone's runs; only the channel's approvers or admins can grant it"})
		}
	}
	if res != nil {
		c.Actions = nil
		c.Resolution = resolutionText(res, resAt)
	}
	return c, nil
}

func resolutionText(res *core.ApprovalResolved, at time.Time) string {
	who := res.By.Name
	if who == "" && res.By.ID != "" {
		who = core.MentionOf(res.By.ID)
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
