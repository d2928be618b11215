package signin_test

import (
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
)

// A connector call whose token the server refuses before it lapses (the
// server revoked it on its side), through the real connectors manager and
// the go-sdk protected server: the call refreshes the grant and succeeds
// in the same turn; when the refresh is refused too, the person is asked
// to sign in again and the dead grant is gone. On the old code the
// refused call asked to sign in while the dead grant stayed stored,
// listed as connected and sent on every later call.
func TestConnectorCallRecoversFromARefusedToken(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.connect("U1", "alice")
	m := connectors.New(&connectors.Config{File: "t.json", FindToolAfter: connectors.DefaultFindToolAfter, Servers: []connectors.Server{
		{Name: "github", Type: connectors.HTTP, URL: r.mcpURL, Identity: connectors.IdentityPerson, Timeout: 10 * time.Second}}},
		connectors.Options{Tokens: r.svc.Token, Rejected: r.svc.Rejected})
	m.Start(ctx)
	t.Cleanup(func() { m.Close() })
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	tc := core.ToolContext{Scope: core.Scope{Platform: "slack", Workspace: "T", Channel: "C1"}, Actor: core.Person{ID: "U1"}}
	signIn, _ := m.Tool("github__sign_in")
	if obs, err := signIn.Run(ctx, tc, []byte(`{}`)); err != nil || obs.SignIn != "" {
		t.Fatalf("sign_in: %+v %v", obs, err)
	}
	who, ok := m.Tool("github__whoami")
	if !ok {
		t.Fatal("no whoami")
	}
	call := func() core.Observation {
		t.Helper()
		obs, err := who.Run(ctx, tc, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	if obs := call(); obs.Text != "alice" {
		t.Fatalf("first call: %+v", obs)
	}
	r.as.DropAccessTokens()
	if obs := call(); obs.Text != "alice" || obs.SignIn != "" {
		t.Fatalf("after the server dropped the token: %+v", obs)
	}
	if n := refreshes(r.as); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	r.as.DropAccessTokens()
	r.as.FailRefresh(true)
	if obs := call(); obs.SignIn != "github" {
		t.Fatalf("refused with no refresh: %+v", obs)
	}
	if cs, _ := r.svc.List(ctx, "slack", "U1"); len(cs) != 0 {
		t.Fatalf("the dead grant stayed: %+v", cs)
	}
	r.noSecrets()
}
