package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

// Run implements core.Surface: it resolves the bot's identity (auth.test),
// warns about look-alike accounts, then receives until ctx ends — over
// Socket Mode, or by making deliver available to Handler in http mode. It
// returns when ctx ends and all its goroutines are done.
func (a *Adapter) Run(ctx context.Context, deliver func(context.Context, core.Inbound) error) error {
	if deliver == nil {
		return errors.New("slack: Run needs a deliver func")
	}
	a.runMu.Lock()
	if a.running || a.starting {
		a.runMu.Unlock()
		return errors.New("slack: Run is already active")
	}
	a.starting = true
	a.runMu.Unlock()
	defer func() {
		a.runMu.Lock() // waits for in-flight HTTP deliveries
		a.running, a.starting, a.deliver = false, false, nil
		a.runMu.Unlock()
		a.bg.Wait()
		// Keep-alive connections would outlive Run; Post reopens as needed.
		a.httpClient.CloseIdleConnections()
	}()

	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	id, err := a.refreshIdentity(ictx)
	if err == nil {
		a.detectAgent(ictx)
	}
	cancel()
	if err != nil {
		return err
	}
	// Only now may HTTP requests be delivered: before, the bot's own
	// mention would not be recognised and a mention acknowledged as chatter.
	a.runMu.Lock()
	a.running, a.starting, a.deliver = true, false, deliver
	a.runMu.Unlock()
	a.log.Info("slack: connected as bot user", "user", id.userID, "team", id.teamID, "mode", string(a.cfg.Mode))
	if a.lookalike {
		a.bg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if _, err := a.CheckLookalikes(lctx); err != nil && ctx.Err() == nil {
				a.log.Debug("slack: look-alike check incomplete", "err", err)
			}
		})
	}
	switch a.cfg.Mode {
	case ModeHTTP:
		<-ctx.Done() // Handler delivers through a.deliver meanwhile
		return nil
	default:
		return a.runSocket(ctx, deliver)
	}
}

// Lookalike is another workspace member whose name matches the bot's.
type Lookalike struct {
	UserID string
	Name   string
}

// CheckLookalikes pages through users.list (bounded: 20 pages of 200) for
// members other than the bot whose handle, display name or real name equals
// one of the bot's, and logs a warning for each: people may mention the wrong
// account, and the bot only answers mentions of its own id.
func (a *Adapter) CheckLookalikes(ctx context.Context) ([]Lookalike, error) {
	self := a.identity()
	if self.userID == "" {
		var err error
		if self, err = a.refreshIdentity(ctx); err != nil {
			return nil, err
		}
	}
	names := map[string]bool{}
	addName := func(s string) {
		if n := normName(s); n != "" {
			names[n] = true
		}
	}
	addName(self.handle)
	addName(self.name)

	var members []slack.User
	p := a.api.GetUsersPaginated(slack.GetUsersOptionLimit(200))
	var err error
	for page := 0; page < 20; page++ {
		// users.list in its paced queue (Tier 2): a 429's Retry-After is
		// waited out there and the same page asked again.
		next := p
		err = a.pacer.lookup(ctx, "users.list", func(ctx context.Context) error {
			var err error
			next, err = p.Next(ctx)
			return err
		})
		if p.Done(err) {
			err = nil
			break
		}
		if err != nil {
			break
		}
		p = next
		members = append(members, p.Users...)
	}
	for _, u := range members {
		if u.ID == self.userID {
			addName(u.Name)
			addName(u.Profile.DisplayName)
			addName(u.RealName)
			addName(u.Profile.RealName)
			if dn := strings.TrimSpace(u.Profile.DisplayName); dn != "" {
				a.idMu.Lock()
				if a.id.userID == u.ID {
					a.id.name = dn
				}
				a.idMu.Unlock()
			}
		}
	}
	var found []Lookalike
	for _, u := range members {
		if u.ID == self.userID || u.Deleted {
			continue
		}
		for _, n := range []string{u.Name, u.Profile.DisplayName, u.RealName, u.Profile.RealName} {
			if names[normName(n)] {
				found = append(found, Lookalike{UserID: u.ID, Name: n})
				a.log.Warn("slack: another workspace member has the bot's name; mentions of them will not reach the bot",
					"user", u.ID, "name", n, "bot_user", self.userID)
				break
			}
		}
	}
	if err != nil {
		return found, fmt.Errorf("slack: users.list: %w", err)
	}
	return found, nil
}

func normName(s string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "@")))
}
