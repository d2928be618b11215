// Package vaulttest is the conformance suite every core.CredentialStore
// runs, with the vault sealing on top: what the database holds after it
// never contains token material, a followed link stays used across a
// restart and another replica, and a sign-in completes once.
package vaulttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/vault"
)

// Harness is one store under test.
type Harness struct {
	Store core.CredentialStore
	// Reopen opens the same database again: a restart, or another replica.
	Reopen func(t *testing.T) core.CredentialStore
	// Dump returns every byte the store holds for grants and sign-ins (all
	// columns of all rows), to be searched for token material.
	Dump func(t *testing.T) []byte
}

// Run runs the suite; newHarness returns a fresh, empty store per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"RoundTripAndListing", roundTrip},
		{"NoTokenMaterialAtRest", noPlaintext},
		{"SealedRowMovedToAnotherPersonDoesNotOpen", movedRow},
		{"KeyRotation", rotation},
		{"DeleteOnlyTheirs", deletes},
		{"SignInLinkIsSingleUseAcrossReplicas", singleUse},
		{"SignInCompletesOnceAndNotAfterExpiry", completeOnce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newHarness(t))
		})
	}
}

func keyring(t *testing.T, cur string, old ...string) *vault.Keyring {
	t.Helper()
	kr, err := vault.ParseKeyring(cur, strings.Join(old, ","))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// Secret-looking values the suite searches for.
const (
	access  = "AT-9f2c41d7e0b3-access-secret"
	refresh = "RT-51aa0c7e9d4f-refresh-secret"
	client  = "CS-0d7e2b9c44aa-client-secret"
	pkce    = "PKCE-8e1f0c2b7a6d-verifier"
)

// expiry is fixed so that two grant(n) are equal.
var expiry = time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()

func grant(n int) vault.Grant {
	return vault.Grant{AccessToken: fmt.Sprintf("%s-%d", access, n), RefreshToken: fmt.Sprintf("%s-%d", refresh, n),
		TokenType: "Bearer", Expiry: expiry, ClientID: "client-1",
		ClientSecret: client, Issuer: "https://as.example", TokenURL: "https://as.example/token", Resource: "https://mcp.example/mcp"}
}

func conn(person, server string) core.Connection {
	return core.Connection{Platform: "slack", Person: person, Server: server, ConnectedAt: time.Now().Truncate(time.Millisecond).UTC()}
}

func roundTrip(t *testing.T, h Harness) {
	ctx := t.Context()
	v := vault.New(h.Store, keyring(t, vault.NewKey()), nil)
	if _, _, ok, err := v.Get(ctx, "slack", "U1", "github"); ok || err != nil {
		t.Fatalf("empty store: ok=%v err=%v", ok, err)
	}
	for i, pc := range [][2]string{{"U2", "linear"}, {"U1", "github"}, {"U1", "linear"}} {
		if err := v.Put(ctx, conn(pc[0], pc[1]), grant(i)); err != nil {
			t.Fatal(err)
		}
	}
	g, c, ok, err := v.Get(ctx, "slack", "U1", "github")
	if err != nil || !ok {
		t.Fatalf("get: ok=%v err=%v", ok, err)
	}
	want := grant(1)
	if g.AccessToken != want.AccessToken || g.RefreshToken != want.RefreshToken || g.ClientSecret != client || !g.Expiry.Equal(want.Expiry) {
		t.Fatalf("round trip lost fields")
	}
	if c.Person != "U1" || c.Server != "github" || !c.ExpiresAt.Equal(want.Expiry) {
		t.Fatalf("connection = %+v", c)
	}
	mine, err := v.Connections(ctx, "slack", "U1")
	if err != nil || len(mine) != 2 || mine[0].Server != "github" || mine[1].Server != "linear" {
		t.Fatalf("U1's connections = %+v, %v", mine, err)
	}
	all, err := v.Connections(ctx, "slack", "")
	if err != nil || len(all) != 3 || all[2].Person != "U2" {
		t.Fatalf("all connections = %+v, %v", all, err)
	}
	if other, _ := v.Connections(ctx, "discord", ""); len(other) != 0 {
		t.Fatalf("another platform sees %d connections", len(other))
	}
	// A grant never prints or marshals its secrets.
	for _, s := range []string{fmt.Sprint(g), fmt.Sprintf("%+v", g), fmt.Sprintf("%#v", g), fmt.Sprintf("%v", []vault.Grant{g})} {
		if strings.Contains(s, access) || strings.Contains(s, refresh) {
			t.Fatalf("a grant printed its token: %s", s)
		}
	}
}

func noPlaintext(t *testing.T, h Harness) {
	ctx := t.Context()
	v := vault.New(h.Store, keyring(t, vault.NewKey()), nil)
	for i, p := range []string{"U1", "U2"} {
		if err := v.Put(ctx, conn(p, "github"), grant(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.BeginSignIn(ctx, core.SignIn{LinkID: "l1", StateHash: "h1", Platform: "slack", Person: "U1", Server: "github",
		BrowserHash: "b1", ExpiresAt: time.Now().Add(time.Minute)}, map[string]string{"verifier": pkce, "client_secret": client}); err != nil {
		t.Fatal(err)
	}
	dump := h.Dump(t)
	if len(dump) == 0 {
		t.Fatal("dump is empty")
	}
	for _, secret := range []string{access, refresh, client, pkce, "-access-", "-refresh-", "verifier"} {
		if bytes.Contains(dump, []byte(secret)) {
			t.Errorf("the database holds %q in clear", secret)
		}
	}
}

func movedRow(t *testing.T, h Harness) {
	ctx := t.Context()
	v := vault.New(h.Store, keyring(t, vault.NewKey()), nil)
	if err := v.Put(ctx, conn("U1", "github"), grant(1)); err != nil {
		t.Fatal(err)
	}
	sg, _, err := h.Store.Grant(ctx, "slack", "U1", "github")
	if err != nil {
		t.Fatal(err)
	}
	// Someone with write access to the database copies U1's sealed grant
	// onto U2's row: U2 must not get U1's token.
	sg.Person = "U2"
	if err := h.Store.PutGrant(ctx, sg); err != nil {
		t.Fatal(err)
	}
	_, _, ok, err := v.Get(ctx, "slack", "U2", "github")
	if ok || !errors.Is(err, vault.ErrOpen) {
		t.Fatalf("moved row: ok=%v err=%v, want ErrOpen", ok, err)
	}
	if strings.Contains(err.Error(), access) {
		t.Fatalf("error shows the token: %v", err)
	}
}

func rotation(t *testing.T, h Harness) {
	ctx := t.Context()
	oldKey, newKey := vault.NewKey(), vault.NewKey()
	before := vault.New(h.Store, keyring(t, oldKey), nil)
	if err := before.Put(ctx, conn("U1", "github"), grant(1)); err != nil {
		t.Fatal(err)
	}
	// Only the new key: the old ciphertext does not open, and says why.
	if _, _, _, err := vault.New(h.Store, keyring(t, newKey), nil).Get(ctx, "slack", "U1", "github"); !errors.Is(err, vault.ErrNoKey) {
		t.Fatalf("without the old key: %v, want ErrNoKey", err)
	}
	// The new key with the old one for reading: opens, and reseals.
	rotated := vault.New(h.Store, keyring(t, newKey, oldKey), nil)
	if g, _, ok, err := rotated.Get(ctx, "slack", "U1", "github"); err != nil || !ok || g.AccessToken != grant(1).AccessToken {
		t.Fatalf("rotated read: ok=%v err=%v", ok, err)
	}
	sg, _, _ := h.Store.Grant(ctx, "slack", "U1", "github")
	if sg.KeyID != keyring(t, newKey).CurrentID() {
		t.Fatalf("after a read the grant is still under key %s", sg.KeyID)
	}
	// Now the old key can be dropped.
	if _, _, ok, err := vault.New(h.Store, keyring(t, newKey), nil).Get(ctx, "slack", "U1", "github"); err != nil || !ok {
		t.Fatalf("after rotation: ok=%v err=%v", ok, err)
	}
}

func deletes(t *testing.T, h Harness) {
	ctx := t.Context()
	v := vault.New(h.Store, keyring(t, vault.NewKey()), nil)
	for i, pc := range [][2]string{{"U1", "github"}, {"U1", "linear"}, {"U2", "github"}} {
		if err := v.Put(ctx, conn(pc[0], pc[1]), grant(i)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := v.Delete(ctx, "slack", "U1", "github"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, _ := v.Delete(ctx, "slack", "U1", "github"); ok {
		t.Fatal("deleted twice")
	}
	if n, err := v.DeleteAll(ctx, "slack", "U1"); n != 1 || err != nil {
		t.Fatalf("delete all: %d %v", n, err)
	}
	if _, err := v.DeleteAll(ctx, "slack", ""); err == nil {
		t.Fatal("deleting everybody's grants with an empty person was accepted")
	}
	all, _ := v.Connections(ctx, "slack", "")
	if len(all) != 1 || all[0].Person != "U2" {
		t.Fatalf("left: %+v", all)
	}
}

func signIn(link, state string, exp time.Time) core.SignIn {
	return core.SignIn{LinkID: link, StateHash: state, Platform: "slack", Person: "U1", Server: "github", BrowserHash: "b", ExpiresAt: exp}
}

func singleUse(t *testing.T, h Harness) {
	ctx := t.Context()
	kr := keyring(t, vault.NewKey())
	v := vault.New(h.Store, kr, nil)
	if err := v.BeginSignIn(ctx, signIn("link1", "s1", time.Now().Add(time.Minute)), "x"); err != nil {
		t.Fatal(err)
	}
	// The same link again, here, after a restart, or on another replica.
	for _, st := range []core.CredentialStore{h.Store, h.Reopen(t)} {
		err := vault.New(st, kr, nil).BeginSignIn(ctx, signIn("link1", "s2", time.Now().Add(time.Minute)), "x")
		if !errors.Is(err, core.ErrSignInUsed) {
			t.Fatalf("link followed twice: %v, want ErrSignInUsed", err)
		}
	}
	// Completed, it stays used.
	var out string
	if _, ok, err := v.CompleteSignIn(ctx, "s1", time.Now(), &out); !ok || err != nil || out != "x" {
		t.Fatalf("complete: %v %v %q", ok, err, out)
	}
	if err := v.BeginSignIn(ctx, signIn("link1", "s3", time.Now().Add(time.Minute)), "x"); !errors.Is(err, core.ErrSignInUsed) {
		t.Fatalf("completed link followed again: %v", err)
	}
}

func completeOnce(t *testing.T, h Harness) {
	ctx := t.Context()
	kr := keyring(t, vault.NewKey())
	v := vault.New(h.Store, kr, nil)
	now := time.Now()
	if err := v.BeginSignIn(ctx, signIn("a", "sa", now.Add(time.Minute)), "secret-a"); err != nil {
		t.Fatal(err)
	}
	if err := v.BeginSignIn(ctx, signIn("b", "sb", now.Add(time.Minute)), "secret-b"); err != nil {
		t.Fatal(err)
	}
	var s string
	if _, ok, err := v.CompleteSignIn(ctx, "wrong", now, &s); ok || err != nil {
		t.Fatalf("a wrong state completed: %v %v", ok, err)
	}
	if _, ok, err := v.CompleteSignIn(ctx, "sb", now.Add(2*time.Minute), &s); ok || err != nil {
		t.Fatalf("an expired sign-in completed: %v %v", ok, err)
	}
	// Two replicas take the same callback at once: exactly one wins.
	other := vault.New(h.Reopen(t), kr, nil)
	var wg sync.WaitGroup
	wins := make(chan string, 2)
	for _, vv := range []*vault.Vault{v, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got string
			if si, ok, err := vv.CompleteSignIn(context.WithoutCancel(ctx), "sa", now, &got); err != nil {
				t.Error(err)
			} else if ok {
				if si.Person != "U1" || got != "secret-a" {
					t.Errorf("completed %+v with %q", si, got)
				}
				wins <- got
			}
		}()
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d replicas completed one sign-in, want 1", n)
	}
	if n, err := h.Store.PurgeSignIns(ctx, now.Add(time.Hour)); n != 2 || err != nil {
		t.Fatalf("purge: %d %v", n, err)
	}
}
