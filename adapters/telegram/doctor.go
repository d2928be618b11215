package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Doctor = (*Adapter)(nil)

// Doctor implements core.Doctor: the token (getMe), privacy mode (without
// which untagged follow-ups never reach the bot in groups), and the webhook
// registration against the configured mode (a webhook left set makes every
// getUpdates fail with 409; polling mode needs none).
func (a *Adapter) Doctor(ctx context.Context) []core.Check {
	id, err := a.refreshIdentity(ctx)
	if err != nil {
		return []core.Check{a.tokenFailure(err)}
	}
	out := []core.Check{{Name: "telegram bot token", Status: core.CheckOK, Detail: fmt.Sprintf("connected as @%s (%d)", id.username, id.id)}}
	if id.readAll {
		out = append(out, core.Check{Name: "telegram privacy mode", Status: core.CheckOK, Detail: "off: the bot sees group messages, so thread-less follow-ups can be answered"})
	} else {
		out = append(out, core.Check{Name: "telegram privacy mode", Status: core.CheckWarn,
			Detail: "on: in groups only mentions, replies to the bot and commands reach it",
			Fix:    "in @BotFather: /setprivacy → choose the bot → Disable, then remove and re-add the bot to each group"})
	}
	var info struct {
		URL string `json:"url"`
	}
	if err := a.callInto(ctx, "getWebhookInfo", nil, &info); err != nil {
		return append(out, core.Check{Name: "telegram webhook", Status: core.CheckWarn, Detail: "getWebhookInfo: " + err.Error()})
	}
	switch {
	case a.cfg.Mode == ModeWebhook && info.URL == "" && a.cfg.WebhookURL == "":
		out = append(out, core.Check{Name: "telegram webhook", Status: core.CheckFail, Detail: "webhook mode, but no webhook is registered with Telegram",
			Fix: "set " + EnvWebhookURL + " to the public https URL of /telegram/webhook (registered at start), or call setWebhook yourself"})
	case a.cfg.Mode == ModeWebhook:
		out = append(out, core.Check{Name: "telegram webhook", Status: core.CheckOK, Detail: "webhook mode: " + or(info.URL, a.cfg.WebhookURL+" (registered at start)")})
	case info.URL != "":
		out = append(out, core.Check{Name: "telegram webhook", Status: core.CheckFail, Detail: "polling mode, but a webhook is registered (" + info.URL + "): getUpdates will fail with 409",
			Fix: "remove it (deleteWebhook), or set " + EnvMode + "=webhook"})
	default:
		out = append(out, core.Check{Name: "telegram polling", Status: core.CheckOK, Detail: "no webhook registered; long polling can run"})
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tokenFailure tells a token Telegram refused (401, 404: reset it with
// @BotFather) from a Bot API that could not be used (the network, a wrong
// MARLOWE_TELEGRAM_API_URL), each on one line and prefixed once.
func (a *Adapter) tokenFailure(err error) core.Check {
	c := core.Check{Name: "telegram bot token", Status: core.CheckFail}
	var ae *APIError
	switch {
	case errors.As(err, &ae) && (ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound):
		c.Detail = fmt.Sprintf("getMe at %s: Telegram refused the token (%d %s)", a.cfg.APIURL, ae.Code, ae.Description)
		c.Fix = "set " + EnvBotToken + " to the token @BotFather gave you (/mybots → the bot → API Token; /revoke issues a new one)"
	case errors.As(err, &ae):
		c.Detail = fmt.Sprintf("getMe at %s: %d %s", a.cfg.APIURL, ae.Code, ae.Description)
		c.Fix = "the Bot API answered with an error, not a refusal of the token: retry later, or check " + EnvAPIURL
	default:
		msg := err.Error()
		for p := "telegram: getMe: "; strings.HasPrefix(msg, p); {
			msg = strings.TrimPrefix(msg, p)
		}
		c.Detail = fmt.Sprintf("getMe at %s: %s", a.cfg.APIURL, strings.Join(strings.Fields(msg), " "))
		c.Fix = "a network problem, not the token: check the network path (DNS, firewall, proxy) to " + a.cfg.APIURL
		if a.cfg.APIURL != DefaultAPIURL {
			c.Fix += " (" + EnvAPIURL + ")"
		}
	}
	return c
}
