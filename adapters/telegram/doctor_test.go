package telegram

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
)

func TestDoctor(t *testing.T) {
	status := func(cs []core.Check, name string) core.Check {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no %q check in %+v", name, cs)
		return core.Check{}
	}
	t.Run("privacy on, polling", func(t *testing.T) {
		f := newFake(t)
		a, _ := newAdapter(t, testConfig(f, ModePolling))
		cs := a.Doctor(context.Background())
		if c := status(cs, "telegram bot token"); c.Status != core.CheckOK {
			t.Errorf("token = %+v", c)
		}
		if c := status(cs, "telegram privacy mode"); c.Status != core.CheckWarn || !strings.Contains(c.Fix, "/setprivacy") {
			t.Errorf("privacy = %+v", c)
		}
		if c := status(cs, "telegram polling"); c.Status != core.CheckOK {
			t.Errorf("polling = %+v", c)
		}
	})
	t.Run("privacy off, webhook left set while polling", func(t *testing.T) {
		f := newFake(t, func(c *telegramfake.Config) { c.ReadAllGroupMessages = true })
		hook, _ := newAdapter(t, testConfig(f, ModeWebhook))
		if _, err := hook.raw(context.Background(), "setWebhook", map[string]string{"url": "https://bot.example/telegram/webhook"}); err != nil {
			t.Fatal(err)
		}
		a, _ := newAdapter(t, testConfig(f, ModePolling))
		cs := a.Doctor(context.Background())
		if c := status(cs, "telegram privacy mode"); c.Status != core.CheckOK {
			t.Errorf("privacy = %+v", c)
		}
		if c := status(cs, "telegram webhook"); c.Status != core.CheckFail || !strings.Contains(c.Detail, "409") {
			t.Errorf("webhook = %+v", c)
		}
	})
	t.Run("bad token", func(t *testing.T) {
		f := newFake(t)
		cfg := testConfig(f, ModePolling)
		cfg.BotToken = "123456:AAwrongwrongwrongwrongwrongwrongwrong"
		a, _ := newAdapter(t, cfg)
		if c := status(a.Doctor(context.Background()), "telegram bot token"); c.Status != core.CheckFail {
			t.Errorf("token = %+v", c)
		}
	})
}

// TestDoctorTokenFailures: a token the fake Bot API refuses and a Bot API
// on a refused local port are told apart, each on one line that names the
// configured base and says "telegram: getMe:" at most once.
func TestDoctorTokenFailures(t *testing.T) {
	f := newFake(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name, token, base, detail, fix string
	}{
		{"refused token", "123456:AAwrongwrongwrongwrongwrongwrongwrong", f.URL(), "Telegram refused the token (401", "@BotFather"},
		{"nothing listens", f.Config().Token, refused, "connection refused", "a network problem, not the token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(f, ModePolling)
			cfg.BotToken, cfg.APIURL = tc.token, tc.base
			a, _ := newAdapter(t, cfg)
			cs := a.Doctor(t.Context())
			if len(cs) != 1 {
				t.Fatalf("%d checks, want the token's alone: %+v", len(cs), cs)
			}
			c := cs[0]
			t.Logf("%s: %s — fix: %s", c.Name, c.Detail, c.Fix)
			if c.Status != core.CheckFail || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) || !strings.Contains(c.Detail, tc.base) {
				t.Errorf("check %+v, want detail with %q and %s, fix with %q", c, tc.detail, tc.base, tc.fix)
			}
			if strings.Count(c.Detail, "getMe: ")+strings.Count(c.Detail, "getMe at ") > 1 || strings.Contains(c.Detail, "telegram: getMe: telegram:") || strings.Contains(c.Detail, "\n") {
				t.Errorf("detail repeats its prefix or spans lines: %q", c.Detail)
			}
			if strings.Contains(c.Detail, tc.token) {
				t.Errorf("detail shows the token: %q", c.Detail)
			}
		})
	}
}

// The identity check's errors name the method once: "telegram: getMe:"
// was repeated by the wrapper around callInto's own error.
func TestIdentityErrorsSayTheirPrefixOnce(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusBadGateway} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"ok":false,"error_code":%d,"description":"nope"}`, status)
		}))
		a, err := New(Config{BotToken: "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", APIURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.refreshIdentity(t.Context())
		srv.Close()
		if err == nil {
			t.Fatalf("%d: no error", status)
		}
		if n := strings.Count(err.Error(), "getMe"); n != 1 {
			t.Errorf("%d: %q names getMe %d times", status, err, n)
		}
		if refused := strings.Contains(err.Error(), "token was refused"); refused != (status == http.StatusUnauthorized) {
			t.Errorf("%d: %q", status, err)
		}
	}
}
