package discord

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

func TestPermalink(t *testing.T) {
	a := &Adapter{}
	for _, tc := range []struct {
		scope core.Scope
		id    string
		want  string
	}{
		{core.Scope{Platform: Platform, Workspace: "G1", Channel: "C1", Thread: "T1"}, "T1", "https://discord.com/channels/G1/T1"},
		{core.Scope{Platform: Platform, Workspace: "G1", Channel: "C1"}, "M1", "https://discord.com/channels/G1/C1/M1"},
		{core.Scope{Platform: Platform, Channel: "D1"}, "M1", "https://discord.com/channels/@me/D1/M1"},
		{core.Scope{Platform: Platform, Workspace: "G1", Channel: "C1"}, "", ""},
	} {
		link, err := a.Permalink(t.Context(), core.MessageRef{Scope: tc.scope, ID: tc.id})
		if link != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%+v %s: %q, %v; want %q", tc.scope, tc.id, link, err, tc.want)
		}
	}
}
