package slack

import (
	"errors"
	"fmt"
	"sync"

	"github.com/slack-go/slack/slackevents"
)

// readiness records that the app lost its access to the workspace. Slack
// says so once (tokens_revoked, app_uninstalled) and then every call fails,
// so the first notice is kept until the process restarts with new tokens.
type readiness struct {
	mu     sync.Mutex
	reason string
}

func (r *readiness) fail(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reason != "" {
		return false
	}
	r.reason = reason
	return true
}

func (r *readiness) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reason == "" {
		return nil
	}
	return errors.New(r.reason)
}

// Ready reports whether the surface can still work: an error after Slack
// said the app's tokens were revoked or the app was uninstalled. The
// health check reads it.
func (a *Adapter) Ready() error {
	if err := a.ready.err(); err != nil {
		return fmt.Errorf("slack: not ready: %w", err)
	}
	return nil
}

// lifecycle handles the app lifecycle events among Events API callbacks;
// it reports whether ev was one (nothing is delivered for them).
func (a *Adapter) lifecycle(ev slackevents.EventsAPIEvent) bool {
	var reason string
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppUninstalledEvent:
		reason = "the app was uninstalled from the workspace (app_uninstalled); reinstall it and restart with its new tokens"
	case *slackevents.TokensRevokedEvent:
		if len(e.Tokens.Bot) == 0 && len(e.Tokens.Oauth) > 0 {
			// Only user tokens, which Marlowe does not use.
			a.log.Warn("slack: user tokens revoked (tokens_revoked); the bot token is unaffected", "team", ev.TeamID, "users", len(e.Tokens.Oauth))
			return true
		}
		reason = "the bot token was revoked (tokens_revoked); reinstall the app and restart with its new SLACK_BOT_TOKEN"
	default:
		return false
	}
	if a.ready.fail(reason) {
		a.log.Error("slack: surface not ready: "+reason, "team", ev.TeamID)
	}
	return true
}
