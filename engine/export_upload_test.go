package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// `export my data` where the platform refuses the file (a Slack app
// installed before it asked for files:write): the person gets the signed
// link when the bot has an address, and a plain account of why not when it
// has none; never a "try again" that can never succeed.
func TestExportFallsBackToTheLinkWhenTheUploadIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		url      string
		want     string
		wantNone string
	}{
		{"with an address", "https://marlowe.example", "https://marlowe.example/export?", "try again"},
		{"without one", "", "MARLOWE_PUBLIC_URL", "try again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, nil, func(c *engine.Config) { c.ExportURL = tc.url })
			h.s.FailUpload = func(core.Scope, core.File) error { return errors.New("missing_scope: files:write") }
			h.deliver(h.inDM(alice, "export my data"))
			h.idle()
			var got string
			for _, p := range h.s.PostsIn(dmScope(alice).Channel) {
				got += p.Out.Text + "\n"
			}
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.wantNone) {
				t.Errorf("DM replies:\n%s\nwant %q and no %q", got, tc.want, tc.wantNone)
			}
			if n := len(h.s.Uploads()); n != 0 {
				t.Errorf("%d files recorded after a refused upload", n)
			}
		})
	}
}
