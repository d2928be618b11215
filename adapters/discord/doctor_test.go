package discord

import (
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
