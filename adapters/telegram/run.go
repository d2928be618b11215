package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/lanes"
)

// allowedUpdates are the update kinds Marlowe subscribes to.
var allowedUpdates = []string{"message", "edited_message", "callback_query"}

// Run implements core.Surface: it resolves the bot's identity (getMe),
// warns when privacy mode is on, sets the command menu (setCommands), then
// receives until ctx ends — by long polling, or (webhook mode) by making
// deliver available to Handler after registering the webhook when
// MARLOWE_TELEGRAM_WEBHOOK_URL is set. It returns when ctx ends and all its goroutines are done.
func (a *Adapter) Run(ctx context.Context, deliver func(context.Context, core.Inbound) error) error {
	if deliver == nil {
		return errors.New("telegram: Run needs a deliver func")
	}
	a.runMu.Lock()
	if a.running {
		a.runMu.Unlock()
		return errors.New("telegram: Run is already active")
	}
	a.running, a.deliver = true, deliver
	a.runMu.Unlock()
	defer func() {
		a.runMu.Lock() // waits for in-flight webhook deliveries
		a.running, a.deliver = false, nil
		a.runMu.Unlock()
		a.bg.Wait()
		a.httpClient.CloseIdleConnections()
	}()

	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	id, err := a.refreshIdentity(ictx)
	cancel()
	if err != nil {
		return err
	}
	a.log.Info("telegram: connected as bot", "bot_id", id.id, "username", id.username, "mode", string(a.cfg.Mode))
	if !id.readAll {
		a.log.Warn("telegram: privacy mode is on: in groups only mentions, replies to the bot and its commands arrive, so untagged follow-ups never do; turn it off with @BotFather → /setprivacy → Disable, then remove and re-add the bot to each group",
			"username", id.username)
	}
	a.setCommands(ctx)
	if a.cfg.Mode == ModeWebhook {
		if a.cfg.WebhookURL != "" {
			if err := a.setWebhook(ctx); err != nil {
				if ctx.Err() != nil {
					return nil // stopped while registering: a stop, not a failure
				}
				return err
			}
		}
		<-ctx.Done() // Handler delivers through a.deliver meanwhile
		return nil
	}
	return a.runPolling(ctx, deliver)
}

func (a *Adapter) setWebhook(ctx context.Context) error {
	// secret_token postdates the SDK's WebhookConfig: sent by hand.
	p := params("url", a.cfg.WebhookURL, "secret_token", a.cfg.WebhookSecret,
		"allowed_updates", mustJSON(allowedUpdates))
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := a.callInto(wctx, "setWebhook", p, nil); err != nil {
		return errors.New("telegram: setWebhook for " + a.cfg.WebhookURL + ": " + err.Error())
	}
	a.log.Info("telegram: webhook registered", "url", a.cfg.WebhookURL)
	return nil
}

// runPolling holds the poller lease and polls while it is held; when the
// lease is lost it stops at once and tries to take it again.
func (a *Adapter) runPolling(ctx context.Context, deliver func(context.Context, core.Inbound) error) error {
	name := "telegram-poller:" + itoa(a.identity().id)
	backoff := time.Second
	for ctx.Err() == nil {
		held, release, err := a.lease.Acquire(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("telegram: poller lease not acquired; retrying", "err", err)
			if sleep(ctx, backoff) != nil {
				return nil
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		// Says which replica polls: the one place an operator (or a test)
		// sees a takeover after the holder died.
		a.log.Info("telegram: holding the poller lease; polling", "lease", name)
		a.poll(ctx, held, deliver)
		release()
		if ctx.Err() == nil {
			a.log.Warn("telegram: poller lease lost; polling stopped until it is held again")
		}
	}
	return nil
}

// poll is the one long-poll loop. The offset it sends confirms every update
// before it, so it only moves past an update once handleUpdate returned nil
// (the update is journaled, deduplicated or ignorable). An update whose
// delivery fails is fetched again (with backoff) and nothing after it is
// confirmed: a crash at any point means redelivery, never loss.
func (a *Adapter) poll(ctx, held context.Context, deliver func(context.Context, core.Inbound) error) {
	var offset int64
	backoff := 200 * time.Millisecond
	fail := func(what string, err error, wait time.Duration) bool {
		if held.Err() != nil {
			return false
		}
		a.log.Warn("telegram: "+what, "err", err, "retry_in", wait)
		return sleep(held, wait) == nil
	}
	defer func() {
		// Confirm what was handled, so a restart does not fetch it again
		// (it would be deduplicated, but it costs a round trip per update).
		// Only on shutdown: after a lost lease another poller owns the
		// offset.
		if offset == 0 || ctx.Err() == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		// The long poll just aborted may still be open at the server for
		// a moment; a getUpdates overlapping it is a 409 conflict.
		_ = sleep(cctx, 100*time.Millisecond)
		_, _ = a.getUpdates(cctx, offset, 0, 1)
	}()
	for held.Err() == nil {
		ups, err := a.getUpdates(held, offset, a.cfg.PollTimeout, 100)
		if err != nil {
			// A 429 never comes here: the pacer waits out its retry_after
			// and polls again (pacer.call).
			var ae *APIError
			if errors.As(err, &ae) && ae.Code == http.StatusConflict {
				// Another poller on this token, or a webhook is set.
				msg := "another process is polling this bot token (only one may: use one replica, a shared lease, or webhook mode)"
				if strings.Contains(ae.Description, "webhook") {
					msg = "a webhook is set for this bot, so polling is refused: set " + EnvMode + "=webhook, or delete the webhook (deleteWebhook)"
				}
				if !fail(msg, err, 10*time.Second) {
					return
				}
				continue
			}
			if !fail("getUpdates failed", err, backoff) {
				return
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		next, err := a.handleBatch(held, ups, offset, deliver)
		offset = next
		if err != nil {
			// Not confirmed: fetched again from the first update not
			// delivered on (the later ones delivered meanwhile are deduped).
			if !fail("update not delivered; it will be fetched again", err, backoff) {
				return
			}
			backoff = min(backoff*2, 30*time.Second)
		}
	}
}

// handleBatch delivers one getUpdates batch: each chat's updates in order,
// chats side by side (at most lanes.Deliveries at once), so a slow delivery
// in one chat (a first append, a lease claim) holds back no other chat's.
// A chat's updates after one that failed wait for the refetch. It returns
// the offset to confirm: past every update up to the first not delivered.
func (a *Adapter) handleBatch(ctx context.Context, ups []update, offset int64, deliver func(context.Context, core.Inbound) error) (int64, error) {
	errs := make([]error, len(ups))
	var mu sync.Mutex
	failed := map[int64]bool{} // chats with an update not delivered
	l := lanes.New(len(ups), lanes.Deliveries, func(i int) {
		u := &ups[i]
		chat := chatOf(u)
		mu.Lock()
		skip := failed[chat]
		mu.Unlock()
		if skip {
			errs[i] = errors.New("an earlier update of this chat was not delivered")
			return
		}
		if err := a.handleUpdate(ctx, u, deliver); err != nil {
			errs[i] = err
			mu.Lock()
			failed[chat] = true
			mu.Unlock()
		}
	})
	for i := range ups {
		if ups[i].UpdateID < offset {
			continue // defensive: already confirmed
		}
		// The limit is the batch, so Add never waits; but once ctx has
		// ended (shutdown mid-batch) it may refuse the item. A refused item
		// was not delivered: the offset must stop before it.
		if err := l.Add(ctx, strconv.FormatInt(chatOf(&ups[i]), 10), i); err != nil {
			errs[i] = fmt.Errorf("telegram: update %d not delivered: %w", ups[i].UpdateID, err)
		}
	}
	l.Wait()
	for i := range ups {
		if ups[i].UpdateID < offset {
			continue
		}
		if errs[i] != nil {
			return offset, errs[i]
		}
		offset = ups[i].UpdateID + 1
	}
	return offset, nil
}

// chatOf is the chat an update belongs to (0 for kinds without one: they
// share a lane).
func chatOf(u *update) int64 {
	switch {
	case u.Message != nil:
		return u.Message.Chat.ID
	case u.EditedMessage != nil:
		return u.EditedMessage.Chat.ID
	case u.CallbackQuery != nil && u.CallbackQuery.Message != nil:
		return u.CallbackQuery.Message.Chat.ID
	}
	return 0
}

// getUpdates long-polls for updates from offset on. Updates that do not
// decode into this package's types are confirmed and dropped, one by one,
// rather than blocking the stream.
func (a *Adapter) getUpdates(ctx context.Context, offset int64, timeout time.Duration, limit int) ([]update, error) {
	p := params("timeout", itoa(int64(timeout/time.Second)), "limit", itoa(int64(limit)),
		"allowed_updates", mustJSON(allowedUpdates))
	if offset != 0 {
		p["offset"] = itoa(offset)
	}
	// The long poll counts bot-wide at normal priority: it is how the bot
	// hears people, so it may use the share kept from edits and reads.
	raw, err := a.call(ctx, core.PriorityNormal, "getUpdates", p)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("telegram: getUpdates: result is not a list")
	}
	out := make([]update, 0, len(items))
	for _, it := range items {
		var u update
		if err := json.Unmarshal(it, &u); err != nil {
			var id struct {
				UpdateID int64 `json:"update_id"`
			}
			if json.Unmarshal(it, &id) == nil && id.UpdateID != 0 {
				a.log.Warn("telegram: update does not decode; confirmed and dropped", "update_id", id.UpdateID)
				out = append(out, update{UpdateID: id.UpdateID})
			}
			continue
		}
		out = append(out, u)
	}
	return out, nil
}
