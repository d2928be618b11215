// Command screenshots regenerates the README's pictures (docs/sandbox.png,
// docs/inbox.png) from a flow a newcomer can repeat by hand: the built
// bot with no model (the offline command grammar) and the sandbox, driven
// through the sandbox's own API and page. scripts/screenshots runs it
// after installing Chromium and an emoji font.
//
// The flow: Alice (an operator: MARLOWE_ADMINS=sandbox:alice) makes notes
// in #general need approval (`policy set approval +write`); Bob asks
// Marlowe to remember something, which waits as a card; Alice asks for her
// `inbox` in her DM (docs/inbox.png), approves in the thread, and Carol's
// `recall` finds the note (docs/sandbox.png).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	out := flag.String("out", "docs", "directory the pictures are written to")
	chrome := flag.String("chromium", "/usr/bin/chromium", "Chromium binary")
	flag.Parse()
	if err := run(*out, *chrome); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
		os.Exit(1)
	}
}

func run(out, chrome string) error {
	tmp, err := os.MkdirTemp("", "marlowe-screenshots-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bot")
	fmt.Println("building the bot…")
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/bot").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/bot: %w\n%s", err, b)
	}
	httpPort, sbPort := freePort(), freePort()
	if httpPort == "" || sbPort == "" || httpPort == sbPort {
		return errors.New("no free port")
	}
	base := "http://127.0.0.1:" + sbPort
	// A clean environment: no model, no platform, whatever the caller has set.
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"HOME=" + tmp, "PATH=" + os.Getenv("PATH"), "MARLOWE_DATA_DIR=" + filepath.Join(tmp, "data"),
		"MARLOWE_HTTP_ADDR=127.0.0.1:" + httpPort, "MARLOWE_SANDBOX_ADDR=127.0.0.1:" + sbPort, "MARLOWE_ADMINS=sandbox:alice"}
	logs, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(logs)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "sandbox ready") {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		return errors.New("the bot did not start")
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("lang", "en-GB"), chromedp.UserDataDir(filepath.Join(tmp, "chrome")),
		chromedp.WindowSize(1440, 940))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) error {
		if err := chromedp.Do(ctx, actions...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	until := func(name, js string) error {
		return step(name, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(30*time.Second))(ctx, tg)
			return chromedp.Void{}, err
		})
	}
	has := func(sel, text string) string {
		return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text)
	}
	be := func(person string) error {
		return step("be "+person, chromedp.Click(chromedp.CSS(`.person-btn[data-person="`+person+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`.person-btn[data-person="`+person+`"][aria-checked="true"]`)))
	}
	shot := func(name string) error {
		if err := step("settle", chromedp.Sleep(500*time.Millisecond)); err != nil {
			return err
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			return err
		}
		fmt.Println("writing", filepath.Join(out, name))
		return os.WriteFile(filepath.Join(out, name), png, 0o644)
	}

	if err := step("open the workspace", chromedp.EmulateViewport(1440, 940), chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`))); err != nil {
		return err
	}
	// The bot's mention, as the page makes it: its id from the workspace.
	var ws struct{ Bot struct{ ID string } }
	if err := getJSON(base+"/api/workspace", &ws); err != nil || ws.Bot.ID == "" {
		return fmt.Errorf("read the workspace: %v", err)
	}
	at := "<@" + ws.Bot.ID + "> "
	if _, err := say(base, "alice", "general", "", at+"policy set approval +write"); err != nil {
		return err
	}
	if err := until("the policy changes", has(`#messages .msg[data-author="marlowe"] .text`, "Policy updated")); err != nil {
		// The answer is in a thread: look for its reply count instead.
		if err := until("the policy answer", `document.querySelectorAll('#messages .msg[data-author="marlowe"], #messages .replies').length > 0`); err != nil {
			return err
		}
	}
	q, err := say(base, "bob", "general", "", at+"remember the deploy freeze starts Friday at 17:00")
	if err != nil {
		return err
	}
	if err := be("alice"); err != nil {
		return err
	}
	if err := step("open Alice's DM", chromedp.Click(chromedp.CSS(`#dms .chan[data-channel="dm-alice"]`))); err != nil {
		return err
	}
	if err := until("the card is in the DM", `!!document.querySelector('#messages .card button[data-action="approve"]')`); err != nil {
		return err
	}
	if _, err := say(base, "alice", "dm-alice", "", "inbox"); err != nil {
		return err
	}
	if err := until("the inbox lists the request", has(`#messages .msg[data-author="marlowe"] .text`, "Your inbox — 1 waiting")); err != nil {
		return err
	}
	if err := shot("inbox.png"); err != nil {
		return err
	}
	if err := step("open the request's thread", chromedp.Navigate(base+"/#c=general&t="+q), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#conn.live`))); err != nil {
		return err
	}
	if err := until("the card in the thread", `!!document.querySelector('#thread-messages .card button[data-action="approve"]')`); err != nil {
		return err
	}
	if err := step("alice approves", chromedp.Click(chromedp.CSS(`#thread-messages .card button[data-action="approve"]`))); err != nil {
		return err
	}
	if err := until("the note is kept", has(`#thread-messages .msg[data-author="marlowe"] .text`, "Remembered")); err != nil {
		return err
	}
	if _, err := say(base, "carol", "general", "", at+"recall deploy freeze"); err != nil {
		return err
	}
	if err := until("carol's recall is answered", has(`#messages .msg[data-author="carol"]`, "recall deploy freeze")+` && document.querySelectorAll('#messages .msg[data-author="carol"] .replies').length > 0`); err != nil {
		return err
	}
	return shot("sandbox.png")
}

// say posts text as person in channel (thread: a reply) through the
// sandbox's API, as the page does, and returns the message's id.
func say(base, person, channel, thread, text string) (string, error) {
	body, _ := json.Marshal(map[string]string{"person": person, "channel": channel, "thread": thread, "text": text})
	req, err := http.NewRequest(http.MethodPost, base+"/api/messages", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("say %q: %s %s", text, resp.Status, b)
	}
	var m struct{ ID string }
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	return m.ID, nil
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
