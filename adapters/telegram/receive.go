package telegram

import (
	"context"
	"errors"
	"fmt"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/marlowe-bot/marlowe/core"
)

// errNotRunning is returned to webhook requests that arrive while no Run is
// active (Telegram retries them).
var errNotRunning = errors.New("telegram: adapter is not running")

// callbackAnswerWait is how long a button press waits for the engine before
// answerCallbackQuery is sent anyway: Telegram shows a spinner until it is,
// and gives up on the query after a few seconds.
const callbackAnswerWait = 2 * time.Second

// handleUpdate delivers one update, at most once across redeliveries. It
// returns nil when the update may be confirmed: delivered now or before, or
// nothing to deliver. Any error leaves it unconfirmed (polling tries it
// again; a webhook answers 5xx and Telegram retries).
func (a *Adapter) handleUpdate(ctx context.Context, u *update, deliver func(context.Context, core.Inbound) error) error {
	var in core.Inbound
	var cb *callbackQuery
	switch {
	case u.Message != nil:
		ev, err := a.normalise(u.Message, false)
		if errors.Is(err, errSkip) {
			return nil
		}
		in.Event = &ev
	case u.EditedMessage != nil:
		// Delivered as an edit, which the filter ignores: the adapter
		// decides nothing about intent.
		ev, err := a.normalise(u.EditedMessage, true)
		if errors.Is(err, errSkip) {
			return nil
		}
		in.Event = &ev
	case u.CallbackQuery != nil:
		cb = u.CallbackQuery
		click, ok := a.clickOf(cb)
		if !ok {
			a.answerCallback(ctx, cb.ID, nil)
			return nil
		}
		in.Click = &click
	default:
		return nil // channel posts and kinds not subscribed to
	}
	key := "upd:" + itoa(a.identity().id) + ":" + itoa(u.UpdateID)
	if cb == nil {
		return a.deliverOnce(ctx, key, in, deliver)
	}
	// A click: answer the callback query whatever happens, so the button
	// never spins, but after the click is recorded when that is quick, so a
	// failure can say so, and a refusal meant for the clicker alone
	// (PostEphemeral) can be the answer's alert.
	pend := a.awaitEphemeral(in.Click.Scope.Channel, in.Click.By.ID, cb.ID)
	done := make(chan error, 1)
	a.bg.Go(func() { done <- a.deliverOnce(ctx, key, in, deliver) })
	deadline := a.now().Add(a.answerWait)
	t := time.NewTimer(a.answerWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			if a.dropEphemeral(pend) {
				a.answerCallback(ctx, cb.ID, err)
			} else {
				a.sendAnswer(ctx, params("callback_query_id", cb.ID, "text", truncateRunes(<-pend.text, maxAlertText), "show_alert", "true"))
			}
			return err
		}
		// Recorded. The engine says "refused" (if at all) just after
		// Deliver returns: answer in the background once it has, or after
		// a short grace, without holding up the poller.
		a.bg.Go(func() { a.answerAfterGrace(ctx, pend, deadline) })
		return nil
	case <-t.C:
		if !a.dropEphemeral(pend) {
			// A refusal came already: it is the answer.
			a.sendAnswer(ctx, params("callback_query_id", cb.ID, "text", truncateRunes(<-pend.text, maxAlertText), "show_alert", "true"))
			return <-done
		}
		a.answerCallback(ctx, cb.ID, nil)
		return <-done
	}
}

// answerCallback stops the button's spinner. A click that could not be
// recorded says so; the outcome of a recorded one (accepted, refused,
// forged) is shown by the engine in the chat and on the card.
func (a *Adapter) answerCallback(ctx context.Context, id string, deliverErr error) {
	p := params("callback_query_id", id)
	if deliverErr != nil {
		p["text"] = "⚠️ That press was not recorded yet. If nothing changes in a moment, press again."
	}
	a.sendAnswer(ctx, p)
}

func (a *Adapter) sendAnswer(ctx context.Context, p tgbotapi.Params) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Not in the chat's queue: the answer goes to the person, not into the
	// chat, and it is only useful within seconds. It counts bot-wide, at
	// normal priority: a person waits on the button's spinner.
	if err := a.callIntoAt(actx, core.PriorityNormal, "answerCallbackQuery", p, nil); err != nil {
		a.log.Debug("telegram: answerCallbackQuery failed", "err", err)
	}
}

// clickOf builds the CardClick of a callback query on one of the bot's
// messages. The card's scope is the chat (and topic) of that message, at
// the top level: Telegram has no threads, and the engine decides on the
// approval's own scope; a refusal for the clicker then goes through the
// channel's (idle) top-level queue, not behind the run that posted the card.
func (a *Adapter) clickOf(cb *callbackQuery) (core.CardClick, bool) {
	m := cb.Message
	if m == nil || cb.Data == "" || cb.From.ID == 0 || cb.From.IsBot {
		return core.CardClick{}, false
	}
	return core.CardClick{
		Scope: core.Scope{Platform: Platform, Channel: channelOf(m.Chat.ID, topicOf(m))},
		Token: cb.Data,
		By:    core.Person{ID: itoa(cb.From.ID), Name: personName(&cb.From)},
		At:    a.now().UTC(), // callback queries carry no time of their own
	}, true
}

// deliverOnce hands in to deliver unless key was delivered before: the
// delivery contract (internal/delivery), each attempt bounded by
// Config.DeliverTimeout. Telegram redelivers what is not confirmed, so a
// failure is returned, not retried here.
func (a *Adapter) deliverOnce(ctx context.Context, key string, in core.Inbound, deliver func(context.Context, core.Inbound) error) error {
	if _, err := a.claims.Deliver(ctx, key, func(ctx context.Context) error { return deliver(ctx, in) }); err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	return nil
}
