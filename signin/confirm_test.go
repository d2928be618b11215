package signin_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
)

// Attack: Mallory got hold of U1's unused link and signs in, in her own
// browser, with her own account. The old code made her grant U1's
// connection at once (U1's runs would act as Mallory). Now it is pending:
// unusable, unlisted, settled only by U1, whose card names Mallory's
// account; U1 rejects it and it is revoked at the server.
func TestSignInByAnotherPersonWaitsForItsPersonToConfirm(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	link, err := r.svc.Link("slack", "U1", "github")
	if err != nil {
		t.Fatal(err)
	}
	r.as.SetUser("mallory")
	if code, page := follow(t, browser(""), link); code != 200 || !strings.Contains(page, "Nothing is connected until they confirm") {
		t.Fatalf("mallory's sign-in: %d %s", code, page)
	}
	if _, err := r.svc.Token(ctx, "slack", "U1", "github"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("U1's runs can use a sign-in U1 did not confirm: %v", err)
	}
	if cs, _ := r.svc.List(ctx, "slack", ""); len(cs) != 0 {
		t.Fatalf("an unconfirmed sign-in is listed as a connection: %+v", cs)
	}
	ev, ok := r.ev.pending("U1")
	if !ok || !strings.Contains(ev.Account, "mallory") {
		t.Fatalf("U1 is not asked, or not told whose account it is: %+v", ev)
	}
	// Mallory (or anyone but U1) presses the card's button: nothing.
	for _, who := range []string{"U2", "", "U1x"} {
		if _, err := r.svc.Confirm(ctx, "slack", who, ev.Pending, true); !errors.Is(err, core.ErrNoPending) {
			t.Fatalf("%q confirmed U1's sign-in: %v", who, err)
		}
	}
	if _, err := r.svc.Confirm(ctx, "discord", "U1", ev.Pending, true); !errors.Is(err, core.ErrNoPending) {
		t.Fatalf("confirmed from another platform: %v", err)
	}
	if _, err := r.svc.Token(ctx, "slack", "U1", "github"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("after the refused clicks: %v", err)
	}
	// U1 sees mallory's account and rejects: revoked at the server, gone.
	if _, rev := r.as.Counts(); rev != 0 {
		t.Fatalf("revocations before: %d", rev)
	}
	if srv, err := r.svc.Confirm(ctx, "slack", "U1", ev.Pending, false); err != nil || srv != "github" {
		t.Fatalf("U1 rejects: %q %v", srv, err)
	}
	if _, rev := r.as.Counts(); rev == 0 {
		t.Error("the rejected grant was not revoked at the server")
	}
	// Settled once: a replayed confirmation finds nothing.
	if _, err := r.svc.Confirm(ctx, "slack", "U1", ev.Pending, true); !errors.Is(err, core.ErrNoPending) {
		t.Fatalf("a rejected sign-in confirmed afterwards: %v", err)
	}
	if _, err := r.svc.Token(ctx, "slack", "U1", "github"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("after the rejection: %v", err)
	}
	// U1's own sign-in, confirmed, acts as U1's account.
	r.connect("U1", "alice")
	tok, err := r.svc.Token(ctx, "slack", "U1", "github")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := signintest.Whoami(ctx, r.mcpURL, tok); err != nil || got != "alice" {
		t.Fatalf("U1 calls as %q (%v)", got, err)
	}
	want := "U1/github:pending U1/github:declined U1/github:pending U1/github:connected"
	if got := strings.Join(r.ev.kinds(), " "); got != want {
		t.Fatalf("events: %s, want %s", got, want)
	}
	r.noSecrets()
}

// A pending sign-in not confirmed in time is refused and dropped, and its
// tokens are revoked at the server (the old code left them live there):
// when the late confirmation comes, or when the next sign-in on the
// platform (theirs or anybody's) purges it.
func TestPendingSignInExpires(t *testing.T) {
	for _, tc := range []struct {
		name   string
		settle func(r *rig, ev core.ConnectionChanged)
	}{
		{"confirmed too late", func(r *rig, ev core.ConnectionChanged) {
			if _, err := r.svc.Confirm(t.Context(), "slack", "U1", ev.Pending, true); !errors.Is(err, core.ErrNoPending) {
				t.Fatalf("a stale sign-in confirmed: %v", err)
			}
		}},
		{"purged by the next sign-in", func(r *rig, ev core.ConnectionChanged) {
			link, _ := r.svc.Link("slack", "U1", "github")
			if code, page := follow(t, browser(""), link); code != 200 {
				t.Fatalf("second sign-in: %d %s", code, page)
			}
			if _, err := r.svc.Confirm(t.Context(), "slack", "U1", ev.Pending, true); !errors.Is(err, core.ErrNoPending) {
				t.Fatalf("a purged sign-in confirmed: %v", err)
			}
		}},
		{"swept with no other sign-in", func(r *rig, ev core.ConnectionChanged) {
			// A quiet platform: nobody signs in again and U1 never clicks.
			if n, err := r.svc.SweepPending(t.Context(), []string{"discord", "slack"}); n != 1 || err != nil {
				t.Fatalf("sweep: %d swept, %v; want 1", n, err)
			}
		}},
		{"purged by someone else's sign-in", func(r *rig, ev core.ConnectionChanged) {
			r.as.SetUser("bob")
			link, _ := r.svc.Link("slack", "U2", "github")
			if code, page := follow(t, browser(""), link); code != 200 {
				t.Fatalf("U2's sign-in: %d %s", code, page)
			}
			// No late click from U1: the purge alone revokes.
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			link, _ := r.svc.Link("slack", "U1", "github")
			r.as.SetUser("alice")
			if code, page := follow(t, browser(""), link); code != 200 {
				t.Fatalf("sign-in: %d %s", code, page)
			}
			var stale []string // the access tokens of the pending grant
			for _, s := range r.as.Secrets() {
				if strings.HasPrefix(s, "at_") {
					stale = append(stale, s)
				}
			}
			for _, tok := range stale {
				if _, err := signintest.Whoami(t.Context(), r.mcpURL, tok); err != nil {
					t.Fatalf("the pending grant's token does not work before: %v", err)
				}
			}
			ev, _ := r.ev.pending("U1")
			r.advance(signin.ConfirmTTL + time.Second)
			tc.settle(r, ev)
			if _, err := r.svc.Token(t.Context(), "slack", "U1", "github"); !errors.Is(err, signin.ErrNotConnected) {
				t.Fatalf("after expiry: %v", err)
			}
			if len(stale) == 0 {
				t.Fatal("no access token was issued")
			}
			for _, tok := range stale {
				if _, err := signintest.Whoami(t.Context(), r.mcpURL, tok); err == nil {
					t.Error("an expired pending sign-in's token still works at the server")
				}
			}
			r.noSecrets()
		})
	}
}

// `forget me` (DisconnectAll) takes sign-ins still waiting for their
// person too: revoked at the server, gone from the database.
func TestForgetMeDropsPendingSignIns(t *testing.T) {
	r := newRig(t)
	link, _ := r.svc.Link("slack", "U1", "github")
	r.as.SetUser("alice")
	if code, page := follow(t, browser(""), link); code != 200 {
		t.Fatalf("sign-in: %d %s", code, page)
	}
	ev, _ := r.ev.pending("U1")
	if _, err := r.svc.DisconnectAll(t.Context(), "slack", "U1", "U1"); err != nil {
		t.Fatal(err)
	}
	if _, rev := r.as.Counts(); rev == 0 {
		t.Error("the pending grant was not revoked at the server")
	}
	if _, err := r.svc.Confirm(t.Context(), "slack", "U1", ev.Pending, true); !errors.Is(err, core.ErrNoPending) {
		t.Fatalf("a forgotten pending sign-in confirmed: %v", err)
	}
}
