package sandbox

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
)

// TestBrowserSaysPlacesInWords: a reply that names Alice's DM shows it as
// "your DM with Marlowe" (it is not a channel called #Marlowe), and a
// message in a private channel that does not mention Marlowe says why in
// a whole sentence.
func TestBrowserSaysPlacesInWords(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: filepath.Join(t.TempDir(), "sandbox.jsonl")})
	base := run(t, sb, engineDeliver(t, sb))
	br := sandboxtest.Start(t, chrome, 1280, 800)
	br.Step("open Alice's DM", chromedp.Navigate(base+"/#c=dm-alice"), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Be("alice")
	say(t, base, "alice", "dm-alice", "", "what do you know about me")
	br.Until("the DM is named in words", `[...document.querySelectorAll('#messages .msg[data-author="marlowe"] .chanlink')].some((e) => e.textContent === "your DM with Marlowe")`)
	if br.True(`[...document.querySelectorAll('#messages .chanlink')].some((e) => e.textContent === "#Marlowe")`) {
		t.Error("the DM is shown as #Marlowe")
	}
	say(t, base, "bob", "private-team", "", "lunch at noon?")
	br.Step("open #private-team", chromedp.Navigate(base+"/#c=private-team"), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Until("the verdict is a sentence", `[...document.querySelectorAll('#messages .why-text[data-reason="private-no-window"]')].some((e) => e.textContent === "Not for Marlowe: in a private channel, only @mentions reach it.")`)
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
