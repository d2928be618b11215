package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// whisperFails is the fake surface whose private messages fail.
type whisperFails struct{ *coretest.FakeSurface }

func (whisperFails) PostEphemeral(context.Context, core.Scope, string, string) error {
	return errors.New("ephemeral refused")
}

// A click on a genuine button of a card this bot has no record of (another
// deployment's, or one whose journal is gone) is answered to the clicker
// alone, and never in the open mentioning them, even when the private
// answer fails (issue 36 item 12).
func TestUnknownButtonIsAnsweredPrivatelyOrNotAtAll(t *testing.T) {
	other, _, ev := wipeHarness(t) // same card key: its tokens verify here
	card, _ := cardOf(other)
	tok := token(card, "approve")
	for _, tc := range []struct {
		name     string
		fails    bool
		whispers int
	}{{"private answer", false, 1}, {"private answer fails", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, nil, func(c *engine.Config) {
				if tc.fails {
					c.Surfaces = map[string]core.Surface{platform: whisperFails{c.Surfaces[platform].(*coretest.FakeSurface)}}
				}
			})
			h.click(bob, tok, threadOf(ev))
			h.idle()
			if posts := h.s.Posts(); len(posts) != 0 {
				t.Errorf("posted in the open: %+v", posts)
			}
			w := h.s.Whispers()
			if len(w) != tc.whispers {
				t.Fatalf("whispers = %+v, want %d", w, tc.whispers)
			}
			for _, x := range w {
				if x.User != bob.ID || !strings.Contains(x.Text, "can't find the request") {
					t.Errorf("whisper = %+v, want Bob told the request is unknown", x)
				}
			}
		})
	}
}
