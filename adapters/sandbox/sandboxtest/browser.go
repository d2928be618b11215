// Package sandboxtest drives the sandbox workspace in headless Chromium
// for tests: the browser started as DEVELOPERS.md says, steps that save a
// screenshot when they fail, polls that await the page's state (never a
// sleep), and the page's own errors collected.
package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium finds the browser (MARLOWE_CHROMIUM, else /usr/bin/chromium),
// or skips the test (fails it under MARLOWE_REQUIRE_SERVICES=1).
func Chromium(t testing.TB) string {
	t.Helper()
	path := os.Getenv("MARLOWE_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if p, err := exec.LookPath(path); err == nil {
		return p
	}
	msg := fmt.Sprintf("no Chromium at %q (set MARLOWE_CHROMIUM, or apt-get install chromium): the browser test of the sandbox did NOT run", path)
	if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
		t.Fatal(msg)
	}
	t.Skip("SKIP: " + msg)
	return ""
}

// Browser is one headless Chromium for one test.
type Browser struct {
	Ctx  context.Context // the browser's: two minutes at most
	t    testing.TB
	mu   sync.Mutex
	errs []string
}

// Start starts Chromium at chrome with a width×height viewport; it stops
// when the test ends.
func Start(t testing.TB, chrome string, width, height int) *Browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("lang", "en-GB"), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	b := &Browser{Ctx: ctx, t: t}
	consoleCtx, stopConsole := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stopConsole()
		wg.Wait()
		cancel()
		cancelBrowser()
		cancelAlloc()
	})
	// The first action starts the browser, for ctx's lifetime.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height)), chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	wg.Go(func() {
		for m, err := range chromedp.Console(consoleCtx) {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	})
	return b
}

// PageErrors returns what the page threw or logged as an error so far.
func (b *Browser) PageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errs)
}

// Shot saves a screenshot in the test's temporary directory and returns it
// (nil when it could not be taken).
func (b *Browser) Shot(name string) []byte {
	png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot: %v", err)
		return nil
	}
	p := filepath.Join(b.t.TempDir(), name)
	if os.WriteFile(p, png, 0o644) == nil {
		b.t.Logf("screenshot saved to %s", p)
	}
	return png
}

// Step runs actions within 20 s, or fails the test after saving a
// screenshot to $TMPDIR/marlowe-sandbox-failed.png.
func (b *Browser) Step(name string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		if png := b.Shot("failed.png"); png != nil {
			p := filepath.Join(os.TempDir(), "marlowe-sandbox-failed.png")
			if os.WriteFile(p, png, 0o644) == nil {
				b.t.Logf("failure screenshot: %s", p)
			}
		}
		b.t.Fatalf("%s: %v", name, err)
	}
}

// Until awaits the script js returning true (15 s at most).
func (b *Browser) Until(name, js string) {
	b.t.Helper()
	b.Step(name, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second))(ctx, tg)
		return chromedp.Void{}, err
	})
}

// True evaluates js now.
func (b *Browser) True(js string) bool {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// Be switches the page to person (the sandbox's people switch).
func (b *Browser) Be(person string) {
	b.t.Helper()
	b.Step("be "+person, chromedp.Click(chromedp.CSS(`.person-btn[data-person="`+person+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.person-btn[data-person="`+person+`"][aria-checked="true"]`)))
}

// CardUsable is a script: the open thread's card has an enabled button
// action.
func CardUsable(action string) string {
	return fmt.Sprintf(`(() => { const b = document.querySelector('#thread-messages .card button[data-action=%q]'); return !!b && !b.disabled; })()`, action)
}
