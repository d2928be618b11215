package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// homeTimeout bounds one publish: the page is a courtesy, never a reason
// for a run to wait.
const homeTimeout = 5 * time.Second

// PublishHome renders userID's inbox on the platform's home page, if the
// platform has one.
func (e *Engine) PublishHome(ctx context.Context, platform, userID string) error {
	s, err := e.surface(platform)
	if err != nil {
		return err
	}
	hv, ok := s.(core.HomeView)
	if !ok || userID == "" {
		return nil
	}
	items, err := e.Inbox(ctx, platform, userID)
	if err != nil {
		return fmt.Errorf("publish home of %s: %w", userID, err)
	}
	hctx, cancel := context.WithTimeout(ctx, homeTimeout)
	defer cancel()
	if err := hv.PublishHome(hctx, userID, items); err != nil {
		return fmt.Errorf("publish home of %s: %w", userID, err)
	}
	return nil
}

// refreshHomes republishes the home pages of the people an approval was put
// to, after it appeared or was decided. Failures are logged only.
func (d *driver) refreshHomes(ctx context.Context, a *runApproval) {
	if _, ok := d.s.(core.HomeView); !ok {
		return
	}
	for _, u := range a.req.Notify {
		if err := d.e.PublishHome(ctx, d.rs.Scope.Platform, u); err != nil && ctx.Err() == nil {
			d.e.log.WarnContext(ctx, "could not refresh a home page", "user", u, "error", err)
		}
	}
}
