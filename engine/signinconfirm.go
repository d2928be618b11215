package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

// Confirming a sign-in (docs/connectors.md, "Acting as each person"): a
// finished sign-in is pending (core.ConnPending) because whoever followed
// the link may have signed in with their own account. Its person gets a
// card in their own DM naming the account that was connected; its signed
// buttons settle it only when that person presses them (the platform
// verified who clicked), and only then does the grant act for their runs
// and the parked run resume.

// Connect confirmation card actions, distinct from every other card's.
const (
	actionConnectConfirm = 'C'
	actionConnectReject  = 'c'
)

func isConnectAction(a byte) bool { return a == actionConnectConfirm || a == actionConnectReject }

// askToConfirm posts ev's confirmation card in the person's DM.
func (e *Engine) askToConfirm(ctx context.Context, dm core.Scope, cause string, ev core.ConnectionChanged) error {
	yes, err := cardToken(e.cfg.CardKey, ev.Pending, actionConnectConfirm)
	if err != nil {
		return err
	}
	no, err := cardToken(e.cfg.CardKey, ev.Pending, actionConnectReject)
	if err != nil {
		return err
	}
	account := ev.Account
	if account == "" {
		account = "(the server did not say)"
	}
	card := &core.Card{
		ID:    "connect-" + ev.Pending,
		Title: "🔌 Someone just signed in to " + ev.Server + " with your link: was it you?",
		Fields: []core.CardField{
			{Label: "Account", Value: account},
			{Label: "If you confirm", Value: "I act on " + ev.Server + " as this account whenever you (" + core.MentionOf(ev.Person) + ") ask me to, and your waiting request continues"},
			{Label: "If it was not you", Value: "press Reject: the sign-in is revoked and deleted, and nothing ran with it"},
		},
		Actions: []core.CardAction{
			{ID: "confirm", Label: "Yes, connect this account", Token: yes, Style: "primary"},
			{ID: "reject", Label: "Reject", Token: no, Style: "danger"},
		},
	}
	e.enqueue(threadKey{dm.Key(), dm.Thread}, job{notice: &notice{key: "connconfirm" + ev.Pending, scope: dm, text: card.Title, cause: cause, card: card}})
	return nil
}

// deliverConnectClick settles the pending sign-in a verified token names,
// in the clicker's name: the service finds it among the clicker's own
// pending sign-ins only, so anybody else's click (a forwarded card, a
// replayed token) finds nothing and changes nothing.
func (e *Engine) deliverConnectClick(ctx context.Context, click core.CardClick, id string, action byte) error {
	tell := func(text string) {
		if click.Scope.Validate() != nil {
			return
		}
		h := sha256.Sum256([]byte(click.Token + "\x00" + click.By.ID + "\x00" + click.At.String()))
		e.enqueue(threadKey{click.Scope.Key(), click.Scope.Thread}, job{notice: &notice{
			key: "connclick" + hex.EncodeToString(h[:10]), scope: click.Scope, text: text, to: click.By.ID}})
	}
	if e.cfg.Connections == nil {
		tell("⚠️ Sign-in is not configured here, so nothing was done.")
		return nil
	}
	if click.By.ID == "" || click.By.IsBot {
		return nil
	}
	server, err := e.cfg.Connections.Confirm(ctx, click.Scope.Platform, click.By.ID, id, action == actionConnectConfirm)
	switch {
	case errors.Is(err, core.ErrNoPending):
		e.log.InfoContext(ctx, "sign-in confirmation refused", "pending", id, "by", click.By.ID)
		tell("🚫 No sign-in of yours waits for this button (it was someone else's, already settled, or expired), so nothing was done.")
		return nil
	case err != nil:
		tell("⚠️ I could not settle this sign-in (" + err.Error() + "); nothing was connected.")
		return fmt.Errorf("settle pending sign-in %s of %s: %w", id, click.By.ID, err)
	}
	e.log.InfoContext(ctx, "sign-in settled by its person", "pending", id, "by", click.By.ID, "server", server, "confirmed", action == actionConnectConfirm)
	return nil
}
