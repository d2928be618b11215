package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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
		return []core.Check{{Name: "discord bot token", Status: core.CheckFail, Detail: err.Error(),
			Fix: "set " + EnvBotToken + " to the bot token (Developer Portal → your application → Bot → Reset Token)"}}
	}
	out := []core.Check{{Name: "discord bot token", Status: core.CheckOK, Detail: fmt.Sprintf("connected as %s (%s)", u.Username, u.ID)}}
	body, err := a.sess.RequestWithBucketID(http.MethodGet, discordgo.EndpointApplication("@me"), nil, discordgo.EndpointApplication(""), discordgo.WithContext(ctx))
	if err != nil {
		return append(out, core.Check{Name: "discord message content intent", Status: core.CheckWarn, Detail: "applications/@me: " + err.Error()})
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
