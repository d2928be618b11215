package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// RequiredScopes are the bot token scopes deploy/slack/manifest.yml asks
// for; a test keeps the two equal.
func RequiredScopes() []string {
	return []string{
		"app_mentions:read", "channels:history", "groups:history", "im:history", "mpim:history",
		"channels:read", "groups:read", "mpim:read", "chat:write", "reactions:write", "im:write", "users:read",
		"files:write", "files:read",
	}
}

var _ core.Doctor = (*Adapter)(nil)

// Doctor implements core.Doctor: the bot token (auth.test) and the scopes
// Slack reports for it against the manifest's, the app-level token in
// socket mode (apps.connections.open), and members who share the bot's name.
func (a *Adapter) Doctor(ctx context.Context) []core.Check {
	var out []core.Check
	auth, scopes, err := a.rawCall(ctx, "auth.test", a.cfg.BotToken)
	switch {
	case err != nil:
		return append(out, core.Check{Name: "slack bot token", Status: core.CheckFail, Detail: err.Error(),
			Fix: fmt.Sprintf("check the network path to %s (%s)", a.cfg.APIURL, EnvAPIURL)})
	case !auth.OK:
		return append(out, core.Check{Name: "slack bot token", Status: core.CheckFail, Detail: "auth.test: " + auth.Error, Fix: tokenFix(auth.Error, EnvBotToken)})
	}
	out = append(out, core.Check{Name: "slack bot token", Status: core.CheckOK,
		Detail: fmt.Sprintf("connected as @%s (%s) in %s (%s)", auth.User, auth.UserID, auth.Team, auth.TeamID)})

	out = append(out, scopeCheck(scopes), agentCheck(scopes))

	switch a.cfg.Mode {
	case ModeHTTP:
		out = append(out, core.Check{Name: "slack events API (http mode)", Status: core.CheckOK,
			Detail: "SLACK_SIGNING_SECRET is set; Slack must reach https://<your host>/slack/events and /slack/interactions, served on MARLOWE_HTTP_ADDR behind a TLS proxy"})
	default:
		res, _, err := a.rawCall(ctx, "apps.connections.open", a.cfg.AppToken)
		switch {
		case err != nil:
			out = append(out, core.Check{Name: "slack app token (socket mode)", Status: core.CheckFail, Detail: err.Error()})
		case !res.OK:
			fix := tokenFix(res.Error, EnvAppToken)
			if res.Error == "not_allowed_token_type" || res.Error == "invalid_auth" {
				fix = "SLACK_APP_TOKEN must be an app-level token (xapp-…) with connections:write: Basic Information → App-Level Tokens; and Socket Mode must be on"
			}
			out = append(out, core.Check{Name: "slack app token (socket mode)", Status: core.CheckFail, Detail: "apps.connections.open: " + res.Error, Fix: fix})
		default:
			out = append(out, core.Check{Name: "slack app token (socket mode)", Status: core.CheckOK, Detail: "Socket Mode connections can be opened"})
		}
	}

	found, err := a.CheckLookalikes(ctx)
	switch {
	case err != nil:
		out = append(out, core.Check{Name: "slack look-alike handles", Status: core.CheckWarn, Detail: "users.list: " + err.Error(),
			Fix: "grant users:read (deploy/slack/manifest.yml) so members sharing the bot's name can be found"})
	case len(found) > 0:
		var names []string
		for _, l := range found {
			names = append(names, fmt.Sprintf("%q (%s)", l.Name, l.UserID))
		}
		out = append(out, core.Check{Name: "slack look-alike handles", Status: core.CheckWarn,
			Detail: "other members share the bot's name: " + strings.Join(names, ", "),
			Fix:    fmt.Sprintf("mentions of them do not reach the bot: rename them or the bot, and tell people to mention <@%s>", auth.UserID)})
	default:
		out = append(out, core.Check{Name: "slack look-alike handles", Status: core.CheckOK, Detail: "no other member shares the bot's name"})
	}
	return out
}

// scopeCheck compares the scopes Slack reports for the bot token
// (X-OAuth-Scopes) with the manifest's.
func scopeCheck(granted []string) core.Check {
	c := core.Check{Name: "slack token scopes"}
	if granted == nil {
		c.Status, c.Detail = core.CheckWarn, "Slack did not report the token's scopes (no X-OAuth-Scopes header)"
		c.Fix = "compare OAuth & Permissions → Bot Token Scopes with deploy/slack/manifest.yml by hand"
		return c
	}
	var missing []string
	for _, s := range RequiredScopes() {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		c.Status, c.Detail = core.CheckFail, "missing: "+strings.Join(missing, ", ")
		c.Fix = "add them under OAuth & Permissions → Bot Token Scopes (or update the app from deploy/slack/manifest.yml), then reinstall the app to the workspace"
		return c
	}
	c.Status, c.Detail = core.CheckOK, fmt.Sprintf("all %d scopes of deploy/slack/manifest.yml granted", len(RequiredScopes()))
	return c
}

// agentCheck says whether the agent surface is on: it is optional, so
// off is not a warning.
func agentCheck(granted []string) core.Check {
	c := core.Check{Name: "slack agent surface", Status: core.CheckOK}
	if slices.Contains(granted, AgentScope) {
		c.Detail = "on (" + AgentScope + " granted): runs stream their plan, tasks and answer into one message and show \"is thinking…\" in the thread"
		return c
	}
	c.Detail = "off (no " + AgentScope + " scope): runs use the checklist message; to turn it on, enable Agents & AI Apps (assistant_view), add the " + AgentScope + " scope and the assistant_thread_started event, and reinstall (docs/slack.md)"
	return c
}

func tokenFix(code, envVar string) string {
	switch code {
	case "invalid_auth", "not_authed":
		return envVar + " is wrong: copy it again from the app's settings (OAuth & Permissions for xoxb-, Basic Information → App-Level Tokens for xapp-)"
	case "token_revoked", "account_inactive", "token_expired", "app_uninstalled":
		return "the app was uninstalled or its token revoked: reinstall it to the workspace and set the new " + envVar
	}
	return "see https://api.slack.com/methods for the error code " + code
}

type rawResult struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	User   string `json:"user"`
	UserID string `json:"user_id"`
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
}

// rawCall posts one Web API method with token and returns its answer and
// the scopes Slack lists for the token (nil when it lists none). slack-go
// does not expose response headers, hence the plain request.
func (a *Adapter) rawCall(ctx context.Context, method, token string) (rawResult, []string, error) {
	var res rawResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.APIURL+method, strings.NewReader(url.Values{}.Encode()))
	if err != nil {
		return res, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.httpClient.Do(req)
	if err != nil {
		return res, nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return res, nil, fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&res); err != nil {
		return res, nil, fmt.Errorf("%s: %w", method, err)
	}
	var scopes []string
	if h, ok := resp.Header["X-Oauth-Scopes"]; ok {
		scopes = []string{}
		for _, v := range h {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					scopes = append(scopes, s)
				}
			}
		}
	}
	return res, scopes, nil
}
