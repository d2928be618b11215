package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
)

// demoRefusal is what the refusal of the wrong person's click says ("Only
// @Bob can approve this; it is still waiting for them.").
const demoRefusal = "can approve this; it is still waiting for them"

// TestSandboxDemoInABrowser follows README.md's sandbox demo word by word
// in headless Chromium against `bot serve` with no configuration (the
// embedded store, no model: the offline grammar): as Alice, mention
// @Marlowe with `policy set approval +write` and `policy set approvers
// bob`, then `remember …`; the approval card appears. Carol, the wrong
// person, presses Allow once: she sees the refusal, and her buttons (and
// Bob's) stay usable. Bob presses it: the card resolves and Marlowe
// remembers. The refusal is shown to Carol only.
func TestSandboxDemoInABrowser(t *testing.T) {
	chrome := sandboxtest.Chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sandboxURL := serveSandbox(t)
	br := sandboxtest.Start(t, chrome, 1280, 900)
	mainBox := chromedp.CSS("#composer-main textarea")
	// mention sends "@Marlowe <text>" from the channel's composer and opens
	// the message's thread once the bot has answered there.
	mention := func(text string) {
		t.Helper()
		br.Step("say @Marlowe "+text, chromedp.Click(mainBox), chromedp.SendKeys(mainBox, "@Marlowe "+text+kb.Enter))
		br.Until("the thread of "+text+" opens with Marlowe's answer", fmt.Sprintf(`(() => {
			const row = [...document.querySelectorAll('#messages .msg[data-author="alice"]')].find((r) => r.querySelector('.text').textContent.includes(%q));
			if (!row || !row.querySelector('.replies')) return false;
			const root = document.querySelector('#thread:not([hidden]) .thread-root .text');
			if (root && root.textContent.includes(%q)) return !!document.querySelector('#thread-messages .msg[data-author="marlowe"]:not(.thread-root)');
			row.querySelector('.text').click();
			return false;
		})()`, text, text))
	}
	threadHas := func(text string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#thread-messages .msg[data-author="marlowe"]')].some((m) => m.textContent.includes(%q))`, text)
	}
	refusal := fmt.Sprintf(`[...document.querySelectorAll('#thread-messages .msg[data-author="marlowe"]')].find((m) => m.textContent.includes(%q))`, demoRefusal)
	usable := sandboxtest.CardUsable("approve")
	allowOnce := chromedp.Click(chromedp.CSS(`#thread-messages .card button[data-action="approve"]`))

	br.Step("open the workspace", chromedp.Navigate(sandboxURL), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Be("alice")
	mention("policy set approval +write")
	br.Until("the policy now asks before writes", threadHas("needs approval"))
	mention("policy set approvers bob")
	br.Until("Bob is the approver", threadHas("approvers"))
	mention("remember deploys freeze on Fridays")
	br.Until("an approval card with its buttons", usable)
	br.Shot("demo-card.png")

	// The wrong person presses the button.
	br.Be("carol")
	br.Step("carol presses Allow once", allowOnce)
	br.Until("carol sees why her click was refused", "!!"+refusal)
	br.Until("carol's buttons are usable again (the request still waits)", usable)
	if !br.True("!!" + refusal + "?.matches('[data-ephemeral]')") {
		t.Error("carol's refusal was posted for everyone, not shown only to her")
	}
	br.Shot("demo-refused.png")

	br.Be("bob")
	if br.True("!!" + refusal) {
		t.Error("Bob sees the refusal of Carol's click, which was for her alone")
	}
	br.Until("bob's buttons were never disabled by carol's click", usable)
	br.Step("bob presses Allow once", allowOnce)
	br.Until("the card resolves: approved by Bob", `[...document.querySelectorAll('#thread-messages .card-resolution')].some((e) => e.textContent.includes("Approved by Bob"))`)
	br.Until("Marlowe remembered", threadHas("Remembered"))
	br.Shot("demo-approved.png")
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
	br.Be("carol")
	br.Until("carol still sees her refusal", "!!"+refusal)
}

// serveSandbox runs `bot serve` with nothing configured but a fresh data
// directory and free ports, as `go run ./cmd/bot` does, and returns the
// sandbox's URL; serve stops when the test ends.
func serveSandbox(t *testing.T) string {
	t.Helper()
	vars := map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_HTTP_ADDR": "127.0.0.1:0", "MARLOWE_SANDBOX_ADDR": "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	logs := newLogWatch("sandbox ready")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop within 15 s")
		}
	})
	select {
	case err := <-done:
		t.Fatalf("serve stopped: %v\n%s", err, logs)
	case <-logs.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", logs)
	}
	m := regexp.MustCompile(`sandbox ready.*url=(http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no sandbox URL in the log:\n%s", logs)
	}
	return m[1]
}
