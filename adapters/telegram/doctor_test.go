package telegram

import (
	"context"
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
		if _, err := hook.call(context.Background(), "setWebhook", map[string]string{"url": "https://bot.example/telegram/webhook"}); err != nil {
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
