package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/llm/scripted"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/store/sqlite"
	"github.com/marlowe-bot/marlowe/tools"
)

// ATTACK (the sandbox's own copies): in the sandbox the platform is the
// bot's own data file, so its copies are the bot's to erase. Alice writes
// a long message with a file attached, the bot's answer quotes it, Bob
// writes too; Alice says `forget me` and confirms. Afterwards no
// 40-character piece of her message is in sandbox.jsonl, on the page, or
// in the attached files' directory, and her file is gone; Bob's message
// stays. On the old code the data file kept her message and the answer
// quoting it ("the sandbox page still shows the messages themselves").
func TestForgetMeErasesTheSandboxsOwnCopies(t *testing.T) {
	secret := coretest.LongText(3, 1200)
	dataFile := filepath.Join(t.TempDir(), "sandbox.jsonl")
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: dataFile, NoStream: true})
	echo := scripted.New().Otherwise(func(v core.View) (core.Reply, error) {
		for i := len(v.Messages) - 1; i >= 0; i-- {
			if v.Messages[i].Role == core.RoleUser {
				return core.Reply{Text: "You said: " + v.Messages[i].Text}, nil
			}
		}
		return core.Reply{Text: "Hello."}, nil
	})
	eng := newEngine(t, sb, func(c *engine.Config) { c.Model = echo })
	base := run(t, sb, eng.Deliver)
	idle := func() {
		t.Helper()
		if err := eng.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	code, body := postJSON(t, base+"/api/files", map[string]any{"name": "notes.txt", "type": "text/plain", "data": []byte("attached: " + secret)})
	if code != 201 {
		t.Fatalf("attach: %d %s", code, body)
	}
	var f fileView
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	code, body = postJSON(t, base+"/api/messages", map[string]any{"person": "alice", "channel": "general", "text": "<@marlowe> " + secret, "files": []string{f.ID}})
	if code != 201 {
		t.Fatalf("say: %d %s", code, body)
	}
	waitMessage(t, sb, "the answer quoting Alice", func(m message) bool { return m.Bot && strings.Contains(m.Text, secret[:200]) })
	idle()
	bobSays := "<@marlowe> lunch at noon, anyone?"
	say(t, base, "bob", "general", "", bobSays)
	waitMessage(t, sb, "Bob's answer", func(m message) bool { return m.Bot && strings.Contains(m.Text, "lunch at noon") })
	idle()
	if raw, _ := os.ReadFile(dataFile); coretest.PieceIn(string(raw), secret) == "" {
		t.Fatal("the test needs Alice's text in the data file before the erasure")
	}

	say(t, base, "alice", "dm-alice", "", "forget me")
	card := waitMessage(t, sb, "the forget card", func(m message) bool {
		return m.Bot && m.Channel == "dm-alice" && m.Card != nil && len(m.Card.Actions) > 0
	})
	if code, body := postJSON(t, base+"/api/click", map[string]string{"person": "alice", "message": card.ID, "action": "erase"}); code != 202 {
		t.Fatalf("click: %d %s", code, body)
	}
	waitMessage(t, sb, "the erasure's report", func(m message) bool {
		return m.Bot && m.Channel == "dm-alice" && strings.Contains(m.Text, "Erased your messages")
	})
	idle()

	raw, err := os.ReadFile(dataFile)
	if err != nil {
		t.Fatal(err)
	}
	if p := coretest.PieceIn(string(raw), secret); p != "" {
		t.Errorf("sandbox.jsonl still holds a piece of Alice's message: %q", p)
	}
	if !strings.Contains(string(raw), "lunch at noon") {
		t.Error("Bob's message was erased too")
	}
	if m, ok := findMessage(sb, func(m message) bool { return coretest.PieceIn(m.Text, secret) != "" }); ok {
		t.Errorf("the page still shows a piece of Alice's message in %s: %q", m.ID, m.Text)
	}
	entries, _ := os.ReadDir(filesDir(dataFile))
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(filesDir(dataFile), e.Name()))
		if coretest.PieceIn(string(b), secret) != "" {
			t.Errorf("the attached file %s survived", e.Name())
		}
	}
	if _, err := sb.files.get(f.ID); err == nil {
		t.Error("Alice's attached file is still served")
	}
}

// ATTACK (a deleted note's copies in the sandbox): Alice has the bot
// remember a long note in #general, and the bot's answer quotes it; Bob
// happens to write the same words in #random. `delete memory` erases the
// note from #general: afterwards no 40-character piece of it is in
// #general's messages or in sandbox.jsonl's lines for them, and Bob's
// message in #random stays (a note is deleted from its channel). On the
// old code the data file kept Alice's message and the answer.
func TestDeleteMemoryErasesTheSandboxsOwnCopies(t *testing.T) {
	note := coretest.LongText(4, 600)
	dir := t.TempDir()
	dataFile := filepath.Join(dir, "sandbox.jsonl")
	sb := newSandbox(t, Config{Clock: time.Now, DataFile: dataFile, NoStream: true})
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "marlowe.db"), coretest.NewSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := core.NewBoundary(nil)
	svc, err := memory.New(memory.Config{Journal: st, Boundary: b, Index: sqlite.NewMemoryIndex(st)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := gate.NewRegistry(tools.Remember())
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.New().Otherwise(func(v core.View) (core.Reply, error) {
		last := v.Messages[len(v.Messages)-1]
		if last.Role == core.RoleTool {
			return core.Reply{Text: "Noted: " + note}, nil
		}
		if _, text, ok := strings.Cut(last.Text, "remember "); ok {
			args, _ := json.Marshal(map[string]string{"text": text})
			return core.Reply{ToolCalls: []core.ToolCall{{ID: "c1", Name: "remember", Args: string(args)}}}, nil
		}
		return core.Reply{Text: "OK."}, nil
	})
	eng := newEngine(t, sb, func(c *engine.Config) {
		c.Journal, c.Boundary, c.Model, c.Tools, c.Memory = st, b, model, reg, svc.Memory
	})
	base := run(t, sb, eng.Deliver)
	idle := func() {
		t.Helper()
		if err := eng.WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	say(t, base, "alice", "general", "", "<@marlowe> remember "+note)
	waitMessage(t, sb, "the answer quoting the note", func(m message) bool {
		return m.Bot && m.Channel == "general" && strings.Contains(m.Text, "Noted: "+note[:100])
	})
	idle()
	say(t, base, "bob", "random", "", "I read somewhere: "+note)
	idle()
	say(t, base, "alice", "general", "", "<@marlowe> memories")
	list := waitMessage(t, sb, "the memories list", func(m message) bool {
		return m.Bot && m.Channel == "general" && strings.Contains(m.Text, "delete memory <id>")
	})
	id := regexp.MustCompile("`(\\w+)` ").FindStringSubmatch(list.Text)
	if id == nil {
		t.Fatalf("no memory id in %q", list.Text)
	}
	idle()
	say(t, base, "alice", "general", "", "<@marlowe> delete memory "+id[1])
	waitMessage(t, sb, "the delete's reply", func(m message) bool { return m.Bot && strings.Contains(m.Text, "Deleted memory") })
	idle()

	raw, err := os.ReadFile(dataFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if p := coretest.PieceIn(line, note); p != "" && !strings.Contains(line, `"channel":"random"`) {
			t.Errorf("sandbox.jsonl still holds a piece of the note outside #random: %q in %s", p, core.Truncate(line, 200))
		}
	}
	if m, ok := findMessage(sb, func(m message) bool { return m.Channel == "general" && coretest.PieceIn(m.Text, note) != "" }); ok {
		t.Errorf("#general still shows a piece of the note in %s", m.ID)
	}
	if _, ok := findMessage(sb, func(m message) bool { return m.Channel == "random" && strings.Contains(m.Text, note) }); !ok {
		t.Error("Bob's message in #random was erased too")
	}
}
