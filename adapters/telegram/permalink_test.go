package telegram

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

func TestPermalink(t *testing.T) {
	a := &Adapter{}
	for _, tc := range []struct {
		channel, id, want string
	}{
		{"-1001234567890", "42", "https://t.me/c/1234567890/42"},
		{"-1001234567890:7", "42", "https://t.me/c/1234567890/7/42"},
		{"-4567", "42", ""}, // a basic group: no message links
		{"601", "42", ""},   // a private chat
		{"-1001234567890", "", ""},
	} {
		link, err := a.Permalink(t.Context(), core.MessageRef{Scope: core.Scope{Platform: Platform, Channel: tc.channel}, ID: tc.id})
		if link != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%s/%s: %q, %v; want %q", tc.channel, tc.id, link, err, tc.want)
		}
	}
}
