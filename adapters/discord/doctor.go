package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Doctor = (*Adapter)(nil)

// Application flags that say the Message Content intent is switched on in
// the developer portal (verified bots, and bots in under 100 servers).
const (
	flagMessageContent        = 1 << 18
	flagMessageContentLimited = 1 << 19
)

// Doctor implements core.Doctor: the token (users/@me) and the Message
// Content intent (applications/@me flags), without which Discord closes the
// gateway with 4014 and untagged follow-ups never arrive.
func (a *Adapter) Doctor(ctx context.Context) []core.Check {
	u, err := a.sess.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return []core.Check{a.tokenFailure(err)}
	}
	out := []core.Check{{Name: "discord bot token", Status: core.CheckOK, Detail: fmt.Sprintf("connected as %s (%s)", u.Username, u.ID)}}
	body, err := a.sess.RequestWithBucketID(http.MethodGet, discordgo.EndpointApplication("@me"), nil, discordgo.EndpointApplication(""), discordgo.WithContext(ctx))
	if err != nil {
		return append(out, core.Check{Name: "discord message content intent", Status: core.CheckWarn, Detail: "applications/@me: " + a.onBase(err.Error())})
	}
	var app struct {
		Flags int `json:"flags"`
	}
	if err := json.Unmarshal(body, &app); err != nil {
		return append(out, core.Check{Name: "discord message content intent", Status: core.CheckWarn, Detail: "applications/@me: " + err.Error()})
	}
	if app.Flags&(flagMessageContent|flagMessageContentLimited) == 0 {
		return append(out, core.Check{Name: "discord message content intent", Status: core.CheckFail,
			Detail: "the Message Content intent is off: Discord will refuse the gateway connection (close 4014)",
			Fix:    "Developer Portal → your application → Bot → Privileged Gateway Intents → turn on Message Content Intent"})
	}
	return append(out, core.Check{Name: "discord message content intent", Status: core.CheckOK, Detail: "on"})
}

// onBase names the configured REST base where discordgo's error names its
// own (https://discord.com/api/v9/…): requests go to the base, rebased.
func (a *Adapter) onBase(s string) string {
	return strings.ReplaceAll(s, discordgo.EndpointAPI, a.cfg.APIURL)
}

// tokenFailure tells a refused token (HTTP 401/403: reset it) from a
// Discord API that did not answer properly (the network, a proxy, a wrong
// MARLOWE_DISCORD_API_URL: the token may be fine).
func (a *Adapter) tokenFailure(err error) core.Check {
	c := core.Check{Name: "discord bot token", Status: core.CheckFail}
	var rest *discordgo.RESTError
	switch {
	case errors.As(err, &rest) && rest.Response != nil && (rest.Response.StatusCode == http.StatusUnauthorized || rest.Response.StatusCode == http.StatusForbidden):
		c.Detail = fmt.Sprintf("the Discord API at %s refused the token (HTTP %d)", a.cfg.APIURL, rest.Response.StatusCode)
		c.Fix = "set " + EnvBotToken + " to the bot token (Developer Portal → your application → Bot → Reset Token)"
	case errors.As(err, &rest) && rest.Response != nil:
		c.Detail = fmt.Sprintf("the Discord API at %s answered users/@me with HTTP %d", a.cfg.APIURL, rest.Response.StatusCode)
		c.Fix = "check that " + EnvAPIURL + " names Discord's REST base (default " + DefaultAPIURL + "), or retry later if Discord is failing"
	default:
		c.Detail = fmt.Sprintf("the Discord API at %s could not be used: %s", a.cfg.APIURL, strings.Join(strings.Fields(a.onBase(err.Error())), " "))
		c.Fix = "a network problem, not the token: check the network path (DNS, firewall, proxy) to " + a.cfg.APIURL
		if a.cfg.APIURL != DefaultAPIURL {
			c.Fix += " (" + EnvAPIURL + ")"
		}
	}
	return c
}
