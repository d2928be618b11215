package main

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/marlowe-bot/marlowe/adapters/sandbox/sandboxtest"
	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
)

// The README's demo of attaching a file, in headless Chromium against
// `bot serve` with a model: Alice picks a screenshot with the composer's
// 📎 (its file input), the chip shows it uploaded, she mentions @Marlowe
// and sends; the message shows the file, and the model gets the image.
func TestSandboxAttachInABrowser(t *testing.T) {
	chrome := sandboxtest.Chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	base, model, _ := serveSandboxWithModel(t)
	shot := filepath.Join(t.TempDir(), "error.png")
	if err := os.WriteFile(shot, attachmentstest.Screenshot(t, 1600, 900), 0o600); err != nil {
		t.Fatal(err)
	}
	br := sandboxtest.Start(t, chrome, 1280, 900)
	box := chromedp.CSS("#composer-main textarea")
	br.Step("open the workspace", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Be("alice")
	br.Step("attach a screenshot", chromedp.SetUploadFiles(chromedp.CSS(`#composer-main input[type=file]`), []string{shot}))
	br.Until("the chip shows the uploaded file", `!!document.querySelector('#composer-main .chip[data-file^="SF"]')`)
	br.Step("mention Marlowe and send", chromedp.Click(box), chromedp.SendKeys(box, "@Marlowe what is wrong here?"+kb.Enter))
	br.Until("the message shows its file", `[...document.querySelectorAll('#messages .msg[data-author="alice"] .files .file')].some((a) => a.textContent.includes('error.png'))`)
	br.Until("the composer is empty again", `!document.querySelector('#composer-main .chip')`)
	img, _ := imageCall(t, model)
	cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != 1568 {
		t.Errorf("the model got %dx%d (%v)", cfg.Width, cfg.Height, err)
	}
	if png := br.Shot("attach.png"); png != nil {
		// Kept for a look: $TMPDIR/marlowe-sandbox-attach.png.
		_ = os.WriteFile(filepath.Join(os.TempDir(), "marlowe-sandbox-attach.png"), png, 0o644)
	}
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
}
