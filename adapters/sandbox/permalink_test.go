package sandbox

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
	"github.com/marlowe-bot/marlowe/core"
)

// A permalink opens the message's channel and thread on the workspace page
// (the page reads #c= and #t=); before the sandbox listens there is no
// address to link to, which is an error, not a broken link.
func TestPermalink(t *testing.T) {
	s := newSandbox(t, Config{})
	ref := core.MessageRef{Scope: core.Scope{Platform: Platform, Workspace: "local", Channel: "general"}, ID: "m 12&x"}
	if _, err := s.Permalink(t.Context(), ref); err == nil {
		t.Fatal("a permalink before the sandbox listens")
	}
	base, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.lnMu.Lock(); _ = s.ln.Close(); s.lnMu.Unlock() })
	link, err := s.Permalink(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	page, frag, ok := strings.Cut(link, "#")
	if !ok || page != base {
		t.Fatalf("link %q: want %s#…", link, base)
	}
	q, err := url.ParseQuery(frag)
	if err != nil || q.Get("c") != "general" || q.Get("t") != "m 12&x" {
		t.Fatalf("link %q reads as %v, %v", link, q, err)
	}
	if _, err := s.Permalink(t.Context(), core.MessageRef{Scope: ref.Scope}); err == nil {
		t.Fatal("a permalink without a message")
	}
}

// Opening a permalink in the browser shows its channel with its thread
// open, as `status` and `approvals` promise.
func TestBrowserPermalinkOpensTheThread(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	sb := newSandbox(t, Config{Clock: time.Now})
	run(t, sb, func(context.Context, core.Inbound) error { return nil })
	root := botPost(t, sb, "root", "random", "", "Standup notes are in.")
	botPost(t, sb, "reply", "random", root.ID, "Reply in the linked thread.")
	link, err := sb.Permalink(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	br := sandboxtest.Start(t, chrome, 1280, 800)
	br.Step("open the permalink", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Until("the linked thread is open", `!document.querySelector('#thread').hidden && [...document.querySelectorAll('#thread-messages .msg')].some((m) => m.textContent.includes("Reply in the linked thread."))`)
	br.Until("in its channel", `[...document.querySelectorAll('#messages .msg')].some((m) => m.textContent.includes("Standup notes are in."))`)
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
