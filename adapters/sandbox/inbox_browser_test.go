package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserDMInbox drives the DM inbox in headless Chromium against the
// real engine: Bob asks the bot to deploy in #general; Alice (an approver)
// finds the card in her DM with Marlowe, asks for her `inbox` there, and
// approves from the DM; the thread card in #general shows her decision and
// the result. (The README's picture comes from scripts/screenshots.)
func TestBrowserDMInbox(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: filepath.Join(t.TempDir(), "sandbox.jsonl")})
	base := run(t, sb, engineDeliver(t, sb, withApprovers))

	br := startBrowser(t, chrome, 1440, 940)
	ctx := br.Ctx

	shot := func() []byte {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Logf("screenshot: %v", err)
		}
		return png
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			if png := shot(); png != nil {
				p := filepath.Join(os.TempDir(), "marlowe-inbox-failed.png")
				if os.WriteFile(p, png, 0o644) == nil {
					t.Logf("failure screenshot: %s", p)
				}
			}
			t.Fatalf("%s: %v", name, err)
		}
	}
	until := func(name, js string) {
		t.Helper()
		step(name, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second))(ctx, tg)
			return chromedp.Void{}, err
		})
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	be := func(person string) {
		t.Helper()
		step("be "+person, chromedp.Click(css(`.person-btn[data-person="`+person+`"]`)),
			chromedp.WaitVisible(css(`.person-btn[data-person="`+person+`"][aria-checked="true"]`)))
	}
	has := func(sel, text string) string {
		return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text)
	}
	mainBox := css("#composer-main textarea")

	step("open the workspace", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`.person-btn[data-person="alice"]`)),
		chromedp.WaitVisible(css(`#conn.live`)))

	// Bob asks for an irreversible deploy in #general.
	be("bob")
	step("bob mentions the bot", chromedp.Click(mainBox), chromedp.SendKeys(mainBox, "@Mar"),
		chromedp.WaitVisible(css(`#composer-main .ac-item[data-key="Marlowe"]`)),
		chromedp.SendKeys(mainBox, kb.Enter+"please deploy release 1.4 to staging"+kb.Enter))
	until("the request routes", `!!document.querySelector('#messages .msg[data-author="bob"] .why[data-reason="mention"]')`)

	// Alice finds the card in her DM with Marlowe and asks for her inbox there.
	be("alice")
	step("open Alice's DM", chromedp.Click(css(`#dms .chan[data-channel="dm-alice"]`)))
	until("the approval card is in Alice's DM", `!!document.querySelector('#messages .card button[data-action="approve"]')`)
	until("the DM card says where it was asked", has(`#messages .card`, "#general"))
	step("alice asks for her inbox", chromedp.Click(mainBox), chromedp.SendKeys(mainBox, "inbox"+kb.Enter))
	until("the inbox answers in the DM", has(`#messages .msg[data-author="marlowe"] .text`, "Your inbox — 1 waiting"))
	step("settle", chromedp.Sleep(300*time.Millisecond))
	png := shot()
	if png == nil {
		t.Fatal("no screenshot")
	}

	// She approves from the DM: her card shows it, and so does the thread's.
	step("alice approves in her DM", chromedp.Click(css(`#messages .card button[data-action="approve"]`)))
	until("the DM card shows the decision", has(`#messages .card-resolution`, "Approved by Alice"))
	// A polled script click: a re-render (the decision arriving) can
	// replace the row between finding it and a pointer click on it.
	until("open #general", `(() => {
		const c = document.querySelector('#channels .chan[data-channel="general"]');
		if (c && c.classList.contains("active")) return true;
		if (c) c.click();
		return false;
	})()`)
	until("open the thread", openThreadJS(`#messages .msg[data-author="bob"] .text`))
	until("the thread card shows Alice's decision", has(`#thread-messages .card-resolution`, "Approved by Alice"))
	until("the result is in the thread", has(`#thread-messages .msg[data-author="marlowe"] .text`, deployResult))

	// Server side: each card was posted once; Bob, the requester, got none in his DM.
	sb.mu.Lock()
	keys := map[string]int{}
	bobCards := 0
	for _, m := range sb.msgs {
		if m.Bot {
			keys[m.Key]++
		}
		if m.Channel == "dm-bob" && m.Card != nil {
			bobCards++
		}
	}
	sb.mu.Unlock()
	for k, n := range keys {
		if n != 1 || k == "" {
			t.Errorf("key %q posted %d times", k, n)
		}
	}
	if bobCards != 0 {
		t.Errorf("the requester got %d DM cards", bobCards)
	}
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors:\n%s", strings.Join(errs, "\n"))
	}
}
