package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/marlowe-bot/marlowe/core"
)

// APIError is a definite answer from the Bot API: ok=false with an
// error_code. RetryAfter is set on 429 (flood control).
type APIError struct {
	Method      string
	Code        int
	Description string
	RetryAfter  time.Duration
	MigrateTo   int64
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("telegram: %s: %d %s", e.Method, e.Code, e.Description)
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	return s
}

// isRateLimited reports a 429 and how long to wait.
func isRateLimited(err error) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == http.StatusTooManyRequests {
		return max(ae.RetryAfter, time.Second), true
	}
	return 0, false
}

// isNotModified is the 400 Telegram answers to an edit that changes nothing:
// the message already shows what we wanted.
func isNotModified(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == http.StatusBadRequest && strings.Contains(ae.Description, "message is not modified")
}

// ctxClient gives the SDK's context-free requests the caller's context: the
// SDK's MakeRequest builds them with http.NewRequest.
type ctxClient struct {
	ctx context.Context
	c   *http.Client
}

func (c ctxClient) Do(req *http.Request) (*http.Response, error) {
	return c.c.Do(req.WithContext(c.ctx))
}

// newBot builds the SDK client without its constructor's getMe, so New
// makes no network call.
func newBot(token, base string, client *http.Client) *tgbotapi.BotAPI {
	bot := &tgbotapi.BotAPI{Token: token, Client: client, Buffer: 100}
	bot.SetAPIEndpoint(base + "/bot%s/%s")
	return bot
}

// raw makes one Bot API request through the SDK's transport with ctx, and
// returns the result. It is not paced: it is what a pacer's queue or
// decoration runs once the call has its slot (call and callInto pace the
// calls outside them). The token is part of every request URL, so
// transport errors (which quote the URL) are scrubbed before they reach
// any log.
func (a *Adapter) raw(ctx context.Context, method string, params tgbotapi.Params) (json.RawMessage, error) {
	bot := *a.bot // a shallow copy per call: only Client differs
	bot.Client = ctxClient{ctx: ctx, c: a.httpClient}
	resp, err := bot.MakeRequest(method, params)
	if err != nil {
		return nil, a.callErr(method, err)
	}
	return resp.Result, nil
}

// callErr is the error of a failed Bot API call: an *APIError when
// Telegram answered, else the transport error with the token scrubbed.
func (a *Adapter) callErr(method string, err error) error {
	var te *tgbotapi.Error
	if errors.As(err, &te) {
		ae := &APIError{Method: method, Code: te.Code, Description: te.Message, MigrateTo: te.MigrateToChatID}
		if te.RetryAfter > 0 {
			ae.RetryAfter = time.Duration(te.RetryAfter) * time.Second
		}
		return ae
	}
	return fmt.Errorf("telegram: %s: %s", method, a.scrub(err.Error()))
}

// call makes a Bot API call outside every chat's queue, at prio: it waits
// for a slot of the bot-wide limit (every call counts there) and a 429's
// retry_after is waited out (pacer.call).
func (a *Adapter) call(ctx context.Context, prio core.Priority, method string, params tgbotapi.Params) (json.RawMessage, error) {
	var res json.RawMessage
	err := a.pacer.call(ctx, method, prio, func(ctx context.Context) error {
		var err error
		res, err = a.raw(ctx, method, params)
		return err
	})
	return res, err
}

// callInto is a call at PriorityEdit (a read, the command menu, the
// webhook: nothing a person waits for in the chat), decoded into out.
func (a *Adapter) callInto(ctx context.Context, method string, params tgbotapi.Params, out any) error {
	return a.callIntoAt(ctx, core.PriorityEdit, method, params, out)
}

// callIntoAt is callInto at prio.
func (a *Adapter) callIntoAt(ctx context.Context, prio core.Priority, method string, params tgbotapi.Params, out any) error {
	return a.pacer.call(ctx, method, prio, func(ctx context.Context) error {
		return a.rawInto(ctx, method, params, out)
	})
}

// rawInto is raw, decoded into out: unpaced, for a pacer's queue or
// decoration to run.
func (a *Adapter) rawInto(ctx context.Context, method string, params tgbotapi.Params, out any) error {
	raw, err := a.raw(ctx, method, params)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("telegram: %s: decode result: %w", method, err)
	}
	return nil
}

func (a *Adapter) scrub(s string) string {
	if a.cfg.BotToken == "" {
		return s
	}
	return strings.ReplaceAll(s, a.cfg.BotToken, "<token>")
}

// params builds form parameters; JSON values (reply_markup, entities,
// reaction, allowed_updates) are encoded by the caller.
func params(kv ...string) tgbotapi.Params {
	p := tgbotapi.Params{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			p[kv[i]] = kv[i+1]
		}
	}
	return p
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs are encoded
	}
	return string(b)
}
