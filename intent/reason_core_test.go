package intent

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// The engine, which does not import this package, recognises a top-level
// follow-up by the reason's name (core.RouteToplevelWindow).
func TestToplevelWindowReasonNameIsCores(t *testing.T) {
	if ReasonToplevelWindow.String() != core.RouteToplevelWindow {
		t.Fatalf("ReasonToplevelWindow is %q, core.RouteToplevelWindow %q", ReasonToplevelWindow, core.RouteToplevelWindow)
	}
}
