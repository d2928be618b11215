package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
	"github.com/marlowe-bot/marlowe/core"
)

// TestBrowserEphemeralRefusal: the real engine behind the sandbox refuses
// a click whose button does not verify with a notice for the clicker only
// (core's Ephemeral path). In Chromium, Carol presses it: her page shows
// the refusal marked "Only visible to you" and her buttons are usable
// again; Bob's page never shows it, and his buttons were never disabled.
func TestBrowserEphemeralRefusal(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sb := newSandbox(t, Config{Clock: time.Now})
	eng := newEngine(t, sb)
	base := run(t, sb, eng.Deliver)
	root := botPost(t, sb, "root", "general", "", "Release 1.4 is ready to ship.")
	out := core.Outbound{Key: "card", Scope: root.Scope, Priority: core.PriorityHigh, Card: &core.Card{ID: "card-x", Title: "🔐 Approval needed: deploy",
		Actions: []core.CardAction{{ID: "approve", Label: "Approve", Token: "not-a-signed-token", Style: "primary"}}}}
	out.Scope.Thread = root.ID
	if _, err := sb.Post(context.Background(), out); err != nil {
		t.Fatal(err)
	}

	br := sandboxtest.Start(t, chrome, 1280, 800)
	refusal := `[...document.querySelectorAll('#thread-messages .msg.ephemeral')].find((m) => m.textContent.includes("could not be verified"))`
	usable := sandboxtest.CardUsable("approve")

	br.Step("open the workspace", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Be("carol")
	br.Until("open the thread", openThreadJS(`#messages .msg[data-author="marlowe"] .text`))
	br.Until("the card's buttons", usable)
	br.Step("carol presses Approve", chromedp.Click(chromedp.CSS(`#thread-messages .card button[data-action="approve"]`)))
	br.Until("carol sees the refusal, for her only", "!!"+refusal+` && `+refusal+`.textContent.includes("Only visible to you")`)
	br.Until("carol's buttons are usable again", usable)

	br.Be("bob")
	br.Until("bob's buttons are usable", usable)
	if !br.True(`![...document.querySelectorAll('#thread-messages .msg')].some((m) => m.textContent.includes("could not be verified")) && document.querySelector('#messages .msg[data-author="marlowe"] .replies .count').textContent === "1 reply"`) {
		t.Error("Bob's page shows Carol's ephemeral refusal (or counts it as a reply)")
	}
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
