package sandbox

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
)

// TestBrowserForgetCardDecidedInPlace: the "forget me" card, once Erase is
// pressed, shows the decision in place and no buttons, as an approval card
// does, and still after a reload (the edit is the message's, not the
// page's): nothing on the page invites a second click.
func TestBrowserForgetCardDecidedInPlace(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: filepath.Join(t.TempDir(), "sandbox.jsonl")})
	base := run(t, sb, engineDeliver(t, sb))
	br := sandboxtest.Start(t, chrome, 1280, 800)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	decided := `(() => { const c = [...document.querySelectorAll('#messages .card')].find((c) => c.textContent.includes("Erase your messages")); ` +
		`return !!c && c.textContent.includes("Erase confirmed by") && !c.querySelector("button"); })()`

	br.Step("open Alice's DM", chromedp.Navigate(base+"/#c=dm-alice"), chromedp.WaitVisible(css(`#conn.live`)))
	br.Be("alice")
	say(t, base, "alice", "dm-alice", "", "forget me")
	br.Until("the card's Erase button", `!!document.querySelector('#messages .card button[data-action="erase"]')`)
	br.Step("alice presses Erase", chromedp.Click(css(`#messages .card button[data-action="erase"]`)))
	br.Until("the card shows the decision, without buttons", decided)
	br.Step("reload", chromedp.Reload(), chromedp.WaitVisible(css(`#conn.live`)))
	br.Until("after a reload too", decided)
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
