package intent

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// An attachment neither routes nor silences: a file with no text decides
// exactly as the same message with text would (a captionless photo in an
// open thread window is a follow-up; outside every window it is ignored),
// and a file does not make an addressed-elsewhere message ours.
func TestAttachmentsNeitherRouteNorSilence(t *testing.T) {
	photo := func(e *core.Event) {
		e.Text = ""
		e.Attachments = []core.Attachment{{ID: "F1", Name: "screen.png", Type: "image/png", Ref: "https://files.slack.com/x"}}
	}
	for _, c := range []struct {
		name string
		ev   core.Event
		w    Windows
		want Reason
	}{
		{"captionless photo in an open thread", ev(inThread, photo), threadOpen, ReasonThreadWindow},
		{"captionless photo in an ended thread", ev(inThread, photo), threadEnded, ReasonNoWindow},
		{"captionless photo at top level, window holder", ev(photo), topOpenU1, ReasonToplevelWindow},
		{"captionless photo, no window", ev(photo), noWindows, ReasonNoWindow},
		{"photo in a DM", ev(dm, photo), noWindows, ReasonDM},
		{"photo addressed to someone else", ev(inThread, photo, mentions(user)), threadOpen, ReasonAddressedToOthers},
	} {
		t.Run(c.name, func(t *testing.T) {
			textOnly := c.ev
			textOnly.Attachments, textOnly.Text = nil, "hello"
			got, same := Decide(c.ev, c.w, t0), Decide(textOnly, c.w, t0)
			if got.Reason != same.Reason {
				t.Errorf("with a file: %s; with text: %s", got.Reason, same.Reason)
			}
			if got.Reason != c.want {
				t.Errorf("reason %s, want %s", got.Reason, c.want)
			}
		})
	}
}
