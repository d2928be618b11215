package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
)

// chromium finds the browser, or skips (fails under MARLOWE_REQUIRE_SERVICES=1).
func chromium(t *testing.T) string { t.Helper(); return sandboxtest.Chromium(t) }

// browser is a headless Chromium for one test (sandboxtest.Browser).
type browser struct{ *sandboxtest.Browser }

// startBrowser starts Chromium at chrome with a width×height viewport; it
// stops when the test ends. br.Ctx is the browser's context.
func startBrowser(t *testing.T, chrome string, width, height int) *browser {
	t.Helper()
	return &browser{sandboxtest.Start(t, chrome, width, height)}
}

func (b *browser) pageErrors() []string { return b.PageErrors() }

// TestBrowserEndToEnd drives the workspace in headless Chromium against the
// real engine (in-memory journal, the intent filter as router, a scripted
// model, an irreversible deploy tool): Carol's chatter is ignored, Alice
// mentions the bot (a reaction, then the answer alone in the thread), Bob follows up in
// the thread untagged and is answered with an approval card, Bob's
// top-level chatter is ignored (no-window), Alice approves and the result
// streams into the run's plan (the deploy task, then done) in one message.
func TestBrowserEndToEnd(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: filepath.Join(t.TempDir(), "sandbox.jsonl")})
	base := run(t, sb, engineDeliver(t, sb))

	br := startBrowser(t, chrome, 1440, 940)
	ctx := br.Ctx

	shot := func(name string) []byte {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Logf("screenshot: %v", err)
			return nil
		}
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, png, 0o644); err == nil {
			t.Logf("screenshot saved to %s", p)
		}
		return png
	}
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			// Kept outside the test's temp dir, which is removed, for a look.
			if png := shot("failed.png"); png != nil {
				p := filepath.Join(os.TempDir(), "marlowe-sandbox-failed.png")
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
	mainBox, threadBox := css("#composer-main textarea"), css("#composer-thread textarea")
	has := func(sel, text string) string {
		return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text)
	}

	step("open the workspace", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css(`.person-btn[data-person="alice"]`)),
		chromedp.WaitVisible(css(`#conn.live`)))

	// Carol: chatter, and a message addressed to Bob. Neither reaches the bot.
	be("carol")
	step("carol chats", chromedp.Click(mainBox), chromedp.SendKeys(mainBox, "Morning all! Standup notes are in the doc."+kb.Enter))
	until("carol's chatter is ignored", `!!document.querySelector('#messages .msg[data-author="carol"] .why[data-reason="no-window"]')`)
	step("carol mentions bob", chromedp.SendKeys(mainBox, "@Bo"), chromedp.WaitVisible(css(`#composer-main .ac-item[data-key="Bob"]`)),
		chromedp.SendKeys(mainBox, kb.Tab+"could you review my export PR?"+kb.Enter))
	until("a message to bob is addressed to others", `!!document.querySelector('#messages .msg[data-author="carol"] .why[data-reason="addressed-to-others"]')`)

	// Alice mentions the bot with the autocomplete.
	be("alice")
	step("alice mentions the bot", chromedp.Click(mainBox), chromedp.SendKeys(mainBox, "@Mar"),
		chromedp.WaitVisible(css(`#composer-main .ac-item[data-key="Marlowe"]`)),
		chromedp.SendKeys(mainBox, kb.Enter+"what's the status of release 1.4?"+kb.Enter))
	until("the mention is a real token and routes",
		`!!document.querySelector('#messages .msg[data-author="alice"] .mention[data-mention="marlowe"]') && !!document.querySelector('#messages .msg[data-author="alice"] .why[data-reason="mention"]')`)
	until("the bot acknowledges in the thread", `!!document.querySelector('#messages .msg[data-author="alice"] .replies')`)

	until("open the thread", openThreadJS(`#messages .msg[data-author="alice"] .text`))
	until("the answer is in the thread", has(`#thread-messages .msg[data-author="marlowe"] .text`, "Release 1.4 is on track"))
	until("the bot acknowledged alice's message with a reaction", `!!document.querySelector('#messages .msg[data-author="alice"] .reaction[data-emoji="eyes"]')`)
	until("a one-step answer is the thread's only bot message", `document.querySelectorAll('#thread-messages .msg[data-author="marlowe"]').length === 1`)

	// Bob follows up in the thread without a mention: the thread window routes it.
	be("bob")
	step("bob replies in the thread", chromedp.Click(threadBox), chromedp.SendKeys(threadBox, "Great, thanks! Can you deploy it to staging?"+kb.Enter))
	until("bob's follow-up routes by the thread window", `!!document.querySelector('#thread-messages .msg[data-author="bob"] .why[data-reason="thread-window"]')`)
	until("the bot answers bob with an approval card", `!!document.querySelector('#thread-messages .card button[data-action="approve"]')`)
	// The run's plan waits too: its deploy task in progress, said in words.
	until("the plan shows the deploy task in progress", `[...document.querySelectorAll('#thread-messages .msg[data-author="marlowe"][data-stream="open"] .plan .task[data-status="in_progress"]')].some(e =>
		e.querySelector('.task-title').textContent === "deploy" && e.querySelector('.task-state').textContent === "in progress")`)

	// Bob's top-level chatter is not for the bot.
	step("bob chats at top level", chromedp.Click(mainBox), chromedp.SendKeys(mainBox, "Anyone up for lunch at noon?"+kb.Enter))
	until("bob's chatter is ignored: no-window", `!!document.querySelector('#messages .msg[data-author="bob"] .why[data-reason="no-window"][data-route="false"]')`)
	shot("approval-pending.png")

	// Alice approves: the run resumes and the result appears.
	be("alice")
	step("alice approves", chromedp.Click(css(`#thread-messages .card button[data-action="approve"]`)))
	until("the card shows its resolution", has(`#thread-messages .card-resolution`, "Approved by Alice"))
	until("the result is in the thread", has(`#thread-messages .msg[data-author="marlowe"] .text`, deployResult))
	// One message holds the finished plan and the answer streamed into it.
	until("the plan and the answer are one message", fmt.Sprintf(`[...document.querySelectorAll('#thread-messages .msg[data-author="marlowe"][data-stream="stopped"]')].some(m =>
		m.querySelector('.plan-title')?.textContent.includes("Done") &&
		[...m.querySelectorAll('.task[data-status="complete"]')].some(e => e.querySelector('.task-title').textContent === "deploy" && e.querySelector('.task-state').textContent === "done") &&
		m.querySelector('.text')?.textContent.includes(%q))`, deployResult))
	until("no checklist message besides", `![...document.querySelectorAll('#thread-messages .msg[data-author="marlowe"] .text')].some(e => e.textContent.startsWith("⏳") || e.textContent.startsWith("✅ Done"))`)
	step("settle", chromedp.Sleep(300*time.Millisecond))

	png := shot("sandbox.png")
	if png == nil {
		t.Fatal("no screenshot")
	}
	// The README's pictures come from scripts/screenshots (a flow without
	// this test's deploy tool), never from here.
	_ = png

	// Server side: nothing was posted twice and the chatter got no reply.
	sb.mu.Lock()
	var bobChat, alice string
	keys := map[string]int{}
	replies := map[string]int{}
	for _, m := range sb.msgs {
		switch {
		case m.Bot:
			keys[m.Key]++
		case m.Author == "bob" && m.Thread == "":
			bobChat = m.ID
		case m.Author == "alice" && m.Thread == "":
			alice = m.ID
		}
		replies[m.Thread]++
	}
	bobReactions := len(sb.msgs[bobChat].Reactions)
	aliceText := sb.msgs[alice].Text
	sb.mu.Unlock()
	if want := "<@marlowe> what's the status of release 1.4?"; aliceText != want {
		t.Errorf("alice sent %q, want %q", aliceText, want)
	}
	for k, n := range keys {
		if n != 1 || k == "" {
			t.Errorf("key %q posted %d times", k, n)
		}
	}
	if replies[bobChat] != 0 || bobReactions != 0 {
		t.Errorf("bob's chatter got %d replies and %d reactions", replies[bobChat], bobReactions)
	}

	// A reload rebuilds the same page from the event stream, each message once.
	count := `document.querySelectorAll('#messages .msg').length`
	before, err := chromedp.Run(ctx, chromedp.Evaluate[int](count))
	if err != nil {
		t.Fatal(err)
	}
	step("reload", chromedp.Reload(), chromedp.WaitVisible(css(`#conn.live`)))
	until("the page catches up after a reload", fmt.Sprintf(`%s === %d && !!document.querySelector('#messages .why[data-reason="mention"]')`, count, before))
	dups, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const ids = [...document.querySelectorAll('#messages .msg')].map(e => e.dataset.id); return ids.length - new Set(ids).size; })()`))
	if err != nil || dups != 0 {
		t.Fatalf("duplicate messages after reload: %d (%v)", dups, err)
	}

	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("page errors:\n%s", strings.Join(errs, "\n"))
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("browser test ran out of time")
	}
}

// openThreadJS is a poll that opens the thread of the message sel names by
// clicking it from script until the thread pane shows. A pointer click lands
// by coordinates, and a re-render (a new message scrolling the list) can
// move the row between locating it and clicking it.
func openThreadJS(sel string) string {
	return fmt.Sprintf(`(() => {
		const pane = document.querySelector('#thread');
		if (pane && !pane.hidden) return true;
		const el = document.querySelector(%q);
		if (el) el.click();
		return false;
	})()`, sel)
}
