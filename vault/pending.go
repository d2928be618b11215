package vault

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// A grant a sign-in produced is pending until its person confirms it in
// their own DM: whoever followed the link may have signed in with their
// own account. A pending grant is stored sealed like any other, under a
// server name no connector can have (pendingPrefix + id + "/" + server),
// so Get for the server never returns it and Connections never lists it.

const pendingPrefix = "~pending/"

// ErrNoPending is core.ErrNoPending.
var ErrNoPending = core.ErrNoPending

// ErrPendingStale is a pending grant taken after its time: it is deleted
// and TakePending returns it anyway, so that its tokens can be revoked at
// the server. It is an ErrNoPending.
var ErrPendingStale = fmt.Errorf("%w (not confirmed in time)", core.ErrNoPending)

func pendingKey(id, server string) string { return pendingPrefix + id + "/" + server }

// PutPending stores g as c's pending grant id (not usable until
// TakePending moves it).
func (v *Vault) PutPending(ctx context.Context, c core.Connection, id string, g Grant) error {
	if id == "" || strings.ContainsAny(id, "/") {
		return fmt.Errorf("pending grant id %q is malformed", id)
	}
	c.Server = pendingKey(id, c.Server)
	return v.Put(ctx, c, g)
}

// TakePending removes person's pending grant id, once, and returns it with
// the server it is for. One of two concurrent takes wins (the store's
// delete decides); a pending grant stored before notBefore is dropped and
// refused with ErrPendingStale, and returned to be revoked.
func (v *Vault) TakePending(ctx context.Context, platform, person, id string, notBefore time.Time) (Grant, core.Connection, error) {
	if id == "" || strings.ContainsAny(id, "/") {
		return Grant{}, core.Connection{}, ErrNoPending
	}
	gs, err := v.store.Grants(ctx, platform, person)
	if err != nil {
		return Grant{}, core.Connection{}, err
	}
	for _, sg := range gs {
		server, ok := strings.CutPrefix(sg.Server, pendingPrefix+id+"/")
		if !ok {
			continue
		}
		g, c, found, err := v.Get(ctx, platform, person, sg.Server)
		deleted, derr := v.store.DeleteGrant(ctx, platform, person, sg.Server)
		if derr != nil {
			return Grant{}, core.Connection{}, derr
		}
		if !deleted || !found {
			return Grant{}, core.Connection{}, ErrNoPending // taken by a concurrent confirmation
		}
		if err != nil {
			return Grant{}, core.Connection{}, err
		}
		if c.ConnectedAt.Before(notBefore) {
			return g, core.Connection{}, ErrPendingStale
		}
		c.Server = server
		return g, c, nil
	}
	return Grant{}, core.Connection{}, ErrNoPending
}

// PurgePending drops person's ("": everybody's on platform) pending grants
// stored before before and returns those it could open (to revoke them at
// their server).
func (v *Vault) PurgePending(ctx context.Context, platform, person string, before time.Time) ([]Grant, error) {
	gs, err := v.store.Grants(ctx, platform, person)
	if err != nil {
		return nil, err
	}
	var out []Grant
	for _, sg := range gs {
		if strings.HasPrefix(sg.Server, pendingPrefix) && sg.ConnectedAt.Before(before) {
			g, _, ok, gerr := v.Get(ctx, platform, sg.Person, sg.Server)
			deleted, err := v.store.DeleteGrant(ctx, platform, sg.Person, sg.Server)
			if err != nil {
				return out, err
			}
			if deleted && ok && gerr == nil {
				out = append(out, g) // only the purge that deleted it revokes it
			}
		}
	}
	return out, nil
}

// DropPending removes every pending grant of person and returns those it
// could open (to revoke them at their server).
func (v *Vault) DropPending(ctx context.Context, platform, person string) ([]Grant, error) {
	gs, err := v.store.Grants(ctx, platform, person)
	if err != nil {
		return nil, err
	}
	var out []Grant
	for _, sg := range gs {
		if !strings.HasPrefix(sg.Server, pendingPrefix) {
			continue
		}
		if g, _, ok, err := v.Get(ctx, platform, person, sg.Server); err == nil && ok {
			out = append(out, g)
		}
		if _, err := v.store.DeleteGrant(ctx, platform, person, sg.Server); err != nil {
			return out, err
		}
	}
	return out, nil
}
