package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/marlowe-bot/marlowe/core"
)

// TestBrowserStreamGrowsInPlace drives a stream from the server side at a
// phone's width (390 px) and watches one message on the page: the plan's
// title and tasks with their states in words (after "Marlowe is thinking…",
// which the stream's start clears), the text growing in the same
// row (the page is never reloaded: a marker set on the window survives),
// then the final state; nothing overflows sideways.
func TestBrowserStreamGrowsInPlace(t *testing.T) {
	chrome := chromium(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	ctx := context.Background()
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: filepath.Join(t.TempDir(), "sandbox.jsonl")})
	base := run(t, sb, newRecorder().deliver)
	root := botPost(t, sb, "root", "general", "", "Release checklist for 1.4")

	br := startBrowser(t, chrome, 390, 844)
	br.Step("open the workspace", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#conn.live`)))
	br.Until("open the thread", openThreadJS(`#messages .msg[data-author="marlowe"] .text`))
	if !br.True(`(window.__sameLoad = true)`) {
		t.Fatal("could not mark the page")
	}

	tasks := func(read, deploy core.TaskStatus) []core.StreamTask {
		return []core.StreamTask{
			{ID: "call-read", Title: "read thread", Status: read},
			{ID: "call-deploy", Title: "deploy to a-rather-long-environment-name-that-must-wrap-on-a-phone", Status: deploy, Output: "waiting for approval"},
		}
	}
	if err := sb.Typing(ctx, streamScope(root.ID)); err != nil {
		t.Fatal(err)
	}
	br.Until("Marlowe is thinking in the thread", `!document.querySelector('#typing-thread').hidden && document.querySelector('#typing-thread').textContent === "Marlowe is thinking…" && document.querySelector('#typing-main').hidden`)
	started := time.Now()
	ref, err := sb.StartStream(ctx, core.Outbound{Key: "run:checklist", Scope: streamScope(root.ID)}, core.StreamUpdate{Title: "⏳ Working on it…", Tasks: tasks(core.TaskInProgress, core.TaskPending)})
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`document.querySelector('#thread-messages .msg[data-id="%s"]')`, ref.ID)
	state := func(id, word string) string {
		return fmt.Sprintf(`%s?.querySelector('.task[data-task="%s"] .task-state')?.textContent === %q`, row, id, word)
	}
	noOverflow := `document.documentElement.scrollWidth <= innerWidth && document.body.scrollWidth <= innerWidth`
	// Well before the indicator would lapse by itself (typingLasts).
	br.Until("the stream's start clears the indicator", `document.querySelector('#typing-thread').hidden`)
	if d := time.Since(started); d > typingLasts/2 {
		t.Errorf("the indicator went %v after the stream started: it lapsed, it was not cleared", d)
	}
	br.Until("the plan and its tasks, states in words", row+`?.dataset.stream === "open" && `+row+`.querySelector('.plan-title').textContent === "⏳ Working on it…" && `+
		state("call-read", "in progress")+" && "+state("call-deploy", "pending")+" && "+row+`.querySelector('.writing') !== null && `+noOverflow)

	text := "Release 1.4 is on track"
	if err := sb.AppendStream(ctx, ref, core.StreamUpdate{Title: "⏳ Working on it…", Tasks: tasks(core.TaskComplete, core.TaskInProgress), Text: text}); err != nil {
		t.Fatal(err)
	}
	br.Until("the first words stream in", fmt.Sprintf(`%s?.querySelector('.text.streaming')?.textContent === %q && `, row, text)+state("call-read", "done")+" && "+state("call-deploy", "in progress"))
	more := text + ": 12 of 14 issues are closed."
	if err := sb.AppendStream(ctx, ref, core.StreamUpdate{Title: "⏳ Working on it…", Tasks: tasks(core.TaskComplete, core.TaskInProgress), Text: more}); err != nil {
		t.Fatal(err)
	}
	br.Until("the text grows in the same message", fmt.Sprintf(`%s?.querySelector('.text')?.textContent === %q`, row, more))
	final := more + " The cut is Thursday."
	if err := sb.StopStream(ctx, ref, core.StreamUpdate{Title: "✅ Done", Tasks: tasks(core.TaskComplete, core.TaskError), Text: final}); err != nil {
		t.Fatal(err)
	}
	br.Until("the final state", fmt.Sprintf(`%s?.dataset.stream === "stopped" && %s.querySelector('.plan-title').textContent === "✅ Done" && %s.querySelector('.text').textContent === %q && !%s.querySelector('.streaming') && `,
		row, row, row, final, row)+state("call-deploy", "failed")+" && "+noOverflow)
	if !br.True(`window.__sameLoad === true`) {
		t.Error("the page was reloaded while the stream grew")
	}
	if !br.True(fmt.Sprintf(`document.querySelectorAll('#thread-messages .msg[data-id="%s"]').length === 1`, ref.ID)) {
		t.Error("the stream does not show as exactly one message")
	}
	if errs := br.PageErrors(); len(errs) > 0 {
		t.Errorf("page errors:\n%s", strings.Join(errs, "\n"))
	}
}
