package discord

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

func TestDoctor(t *testing.T) {
	check := func(cs []core.Check, name string) core.Check {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no %q check in %+v", name, cs)
		return core.Check{}
	}
	for _, tc := range []struct {
		name    string
		token   string
		fake    discordfake.Config
		token0  core.CheckStatus
		content core.CheckStatus // "" = no such check expected
	}{
		{name: "all good", token: "test-token", token0: core.CheckOK, content: core.CheckOK},
		{name: "message content off", token: "test-token", fake: discordfake.Config{NoMessageContent: true}, token0: core.CheckOK, content: core.CheckFail},
		{name: "wrong token", token: "wrong", token0: core.CheckFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.fake)
			a, err := New(Config{BotToken: tc.token, APIURL: f.APIURL()})
			if err != nil {
				t.Fatal(err)
			}
			cs := a.Doctor(t.Context())
			if c := check(cs, "discord bot token"); c.Status != tc.token0 {
				t.Errorf("token = %+v", c)
			}
			if tc.content == "" {
				return
			}
			c := check(cs, "discord message content intent")
			if c.Status != tc.content || (tc.content == core.CheckFail && !strings.Contains(c.Fix, "Message Content")) {
				t.Errorf("message content = %+v", c)
			}
		})
	}
}

// TestDoctorTokenFailures: each way users/@me can fail is told apart, and
// names the configured API base (never discordgo's built-in one): a
// refused token gets the Reset Token advice; a base that does not answer
// (a refused local port) or answers with an error is a network or URL
// problem, with no token advice.
func TestDoctorTokenFailures(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(broken.Close)
	refused := refusedURL(t)
	for _, tc := range []struct {
		name, token, base string
		detail, fix       string // substrings
		tokenAdvice       bool
	}{
		{"wrong token", "wrong", f.APIURL(), "refused the token (HTTP 401)", "Reset Token", true},
		{"nothing listens", "test-token", refused, "connection refused", "a network problem, not the token", false},
		{"the base answers 502", "test-token", broken.URL + "/api/v10/", "HTTP 502", "not the token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{BotToken: tc.token, APIURL: tc.base})
			if err != nil {
				t.Fatal(err)
			}
			cs := a.Doctor(t.Context())
			if len(cs) != 1 {
				t.Fatalf("%d checks, want the token's alone: %+v", len(cs), cs)
			}
			c := cs[0]
			t.Logf("%s: %s — fix: %s", c.Name, c.Detail, c.Fix)
			if c.Status != core.CheckFail || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("check %+v, want detail with %q and fix with %q", c, tc.detail, tc.fix)
			}
			if base := strings.TrimSuffix(tc.base, "/"); !strings.Contains(c.Detail, base) {
				t.Errorf("detail %q does not name the configured base %s", c.Detail, base)
			}
			if strings.Contains(c.Detail, "discord.com") {
				t.Errorf("detail %q names discord.com although %s is configured", c.Detail, tc.base)
			}
			if got := strings.Contains(c.Fix, "Reset Token"); got != tc.tokenAdvice {
				t.Errorf("Reset Token advice = %v, want %v: %q", got, tc.tokenAdvice, c.Fix)
			}
			if strings.Contains(c.Detail, "\n") {
				t.Errorf("detail spans lines: %q", c.Detail)
			}
		})
	}
}

// refusedURL is an http base on a local port nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/api/v10/"
}
