package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/attachments"
	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// fileSurface is the fake surface with files people shared, fetched as a
// platform adapter would (by reference, under the cap), counted.
type fileSurface struct {
	*coretest.FakeSurface
	mu      sync.Mutex
	files   map[string][]byte
	fetches map[string]int
}

func (s *fileSurface) FetchAttachment(_ context.Context, a core.Attachment, max int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches[a.Ref]++
	b := s.files[a.Ref]
	if int64(len(b)) > max {
		return nil, core.ErrAttachmentTooLarge
	}
	return b, nil
}

func (s *fileSurface) fetched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.fetches {
		n += c
	}
	return n
}

// countingReader counts the reads the engine asks for.
type countingReader struct {
	core.AttachmentReader
	mu sync.Mutex
	n  int
}

func (c *countingReader) ReadAttachments(ctx context.Context, f core.AttachmentFetcher, atts []core.Attachment) []core.AttachmentSeen {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.AttachmentReader.ReadAttachments(ctx, f, atts)
}

func (c *countingReader) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func withFiles(t *testing.T, h *harness) (*fileSurface, *countingReader, attachments.DirBlobs) {
	fs := &fileSurface{FakeSurface: h.s, files: map[string][]byte{
		"shot": attachmentstest.Screenshot(t, 800, 450),
		"csv":  attachmentstest.CSV(30),
		"big":  make([]byte, 3000),
	}, fetches: map[string]int{}}
	r := &countingReader{AttachmentReader: attachments.New(attachments.Config{MaxBytes: 2048 * 1024, Images: true})}
	blobs := attachments.DirBlobs{Dir: t.TempDir()}
	h.cfg.Surfaces = map[string]core.Surface{platform: fs}
	h.cfg.Attachments, h.cfg.Blobs = r, blobs
	return fs, r, blobs
}

func shared() []core.Attachment {
	return []core.Attachment{
		{ID: "F1", Name: "error.png", Type: "image/png", Ref: "shot"},
		{ID: "F2", Name: "orders.csv", Type: "text/csv", Ref: "csv"},
		{ID: "F3", Name: "dump.bin", Type: "application/zip", Size: 4 << 20, Ref: "big"},
	}
}

// A mention with a screenshot, a CSV and a file past the cap: the model
// gets the image as pixels, the CSV as fenced untrusted text and a line
// saying what could not be read and why; the checklist tells the person;
// the journal holds the observation (hash, dims, text), not the pixels.
func TestSharedFilesReachTheModel(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("The FAILED orders are 1017."))
	h := newHarness(t, m, nil)
	fs, r, blobs := withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "what's wrong here?")
	ev.Attachments = shared()
	h.deliver(ev)
	h.idle()

	views := m.Views()
	if len(views) != 1 {
		t.Fatalf("model calls %d", len(views))
	}
	var files *core.Message
	for i := range views[0].Messages {
		if strings.Contains(views[0].Messages[i].Text, "Files Alice shared") {
			files = &views[0].Messages[i]
		}
	}
	if files == nil {
		t.Fatalf("no files message in %+v", views[0].Messages)
	}
	if len(files.Images) != 1 || len(files.Images[0].Data) == 0 || files.Images[0].Type != "image/png" {
		t.Errorf("images %+v", files.Images)
	}
	for _, want := range []string{`<untrusted-content source="attachment" name="orders.csv"`, "1017,cust17", `[file "dump.bin" could not be read: not read: 4.0 MiB is past the 2.0 MiB limit`} {
		if !strings.Contains(files.Text, want) {
			t.Errorf("files message lacks %q:\n%s", want, files.Text)
		}
	}
	if fs.fetched() != 2 || r.reads() != 1 {
		t.Errorf("fetched %d files in %d reads, want 2 in 1 (the one declared past the cap is not fetched)", fs.fetched(), r.reads())
	}
	// Journaled: the observation, with the image's hash and dimensions.
	done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
	if len(done) != 1 || len(done[0].Attachments) != 3 {
		t.Fatalf("tool.completed %+v", done)
	}
	img := done[0].Attachments[0]
	if img.Kind != core.SeenImage || img.Image == nil || img.Image.Width != 800 || img.Pixels != nil {
		t.Errorf("journaled image %+v", img)
	}
	if b, err := blobs.GetBlob(context.Background(), img.Image.SHA256); err != nil || len(b) == 0 {
		t.Errorf("blob: %v", err)
	}
	// The person sees what could not be read (the checklist).
	if !shown(h, "Could not read dump.bin") {
		t.Errorf("nothing told the person; posts: %v", h.s.Posts())
	}
	h.verify("C1")
}

// A restart after the files were read and journaled, before the model
// answered: the resumed run shows the same files (the image from the blob
// store) without downloading or reading anything again.
func TestResumedRunNeverReadsFilesAgain(t *testing.T) {
	blocked := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	m := coretest.NewScriptedModel(coretest.Text("answer"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if n == 1 {
			once.Do(func() { close(blocked) })
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	h := newHarness(t, m, nil)
	fs, r, _ := withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "look")
	ev.Attachments = shared()
	h.deliver(ev)
	<-blocked
	// The process dies while the model call is in flight.
	_ = h.e.Close()
	close(release)
	if r.reads() != 1 || fs.fetched() != 2 {
		t.Fatalf("before the restart: %d reads, %d fetches", r.reads(), fs.fetched())
	}
	h.start()
	h.idle()
	if r.reads() != 1 || fs.fetched() != 2 {
		t.Errorf("after the restart: %d reads, %d fetches; want no new one", r.reads(), fs.fetched())
	}
	views := m.Views()
	last := views[len(views)-1]
	found := false
	for _, msg := range last.Messages {
		if len(msg.Images) == 1 && len(msg.Images[0].Data) > 0 && strings.Contains(msg.Text, "orders.csv") {
			found = true
		}
	}
	if !found {
		t.Errorf("the resumed call lacks the files: %+v", last.Messages)
	}
	if runs := h.runs("C1"); len(runs) != 1 {
		t.Errorf("runs %d", len(runs))
	}
}

// A model that refuses images is asked again without them and told to
// say it cannot see them.
func TestModelRefusingImagesIsAskedWithout(t *testing.T) {
	var sawRefusal bool
	m := coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		for _, msg := range v.Messages {
			if len(msg.Images) > 0 {
				sawRefusal = true
				return core.Reply{}, &core.ModelError{Provider: "scripted", Failure: core.FailBadRequest, Err: errString("image input not supported")}
			}
		}
		return core.Reply{Text: "I cannot see images, but the CSV shows 1017 failed."}, nil
	})
	h := newHarness(t, m, nil)
	withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "look")
	ev.Attachments = shared()[:2]
	h.deliver(ev)
	h.idle()
	views := m.Views()
	if !sawRefusal || len(views) != 2 || !strings.Contains(lastFiles(views[1]), "the model in use cannot see images") {
		t.Fatalf("refusal %v, %d calls", sawRefusal, len(views))
	}
	if !shown(h, "I cannot see images") {
		t.Errorf("answer not posted: %v", h.s.Posts())
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func lastFiles(v core.View) string {
	for _, m := range v.Messages {
		if strings.Contains(m.Text, "Files Alice shared") {
			return m.Text
		}
	}
	return ""
}

// shown reports whether a post or an edit of one showed substr.
func shown(h *harness, substr string) bool {
	if _, ok := h.s.Find(substr); ok {
		return true
	}
	for _, e := range h.s.Edits() {
		if strings.Contains(e.Out.Text, substr) {
			return true
		}
	}
	return false
}

// `forget me` after sharing files: the record of what the model saw of
// them (the CSV's rows, the image's hash) is redacted with the message,
// though it holds none of the words the person typed, and the image's
// blob is deleted. Retention does the same to old records.
func TestForgetMeErasesSharedFiles(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("Looked at it."))
	h := newHarness(t, m, nil)
	_, _, blobs := withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "what's wrong here?")
	ev.Attachments = shared()[:2]
	h.deliver(ev)
	h.idle()
	done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
	if len(done) != 1 || done[0].Attachments[0].Image == nil {
		t.Fatalf("no files record: %+v", done)
	}
	hash := done[0].Attachments[0].Image.SHA256
	holding := func() []string {
		var out []string
		for _, c := range h.j.All(chanScope("C1").Key()) {
			p := string(c.RawPayload())
			if strings.Contains(p, "cust17") || strings.Contains(p, hash) {
				out = append(out, c.String())
			}
		}
		return out
	}
	if len(holding()) == 0 {
		t.Fatal("the scenario journaled nothing of the files")
	}

	dm := core.Event{Scope: core.Scope{Platform: platform, Workspace: "W1", Channel: "DALICE"}, Visibility: core.DM,
		MessageID: h.msgID(), Author: alice, Text: "forget me", At: h.clk.Now()}
	h.deliver(dm)
	h.idle()
	cards := h.s.Cards()
	if len(cards) == 0 {
		t.Fatalf("no forget card; posts %v", h.s.Posts())
	}
	card := cards[len(cards)-1]
	tok := ""
	for _, a := range card.Out.Card.Actions {
		if a.ID == "erase" {
			tok = a.Token
		}
	}
	if tok == "" {
		t.Fatalf("card actions %+v", card.Out.Card.Actions)
	}
	h.click(alice, tok, card.Ref.Scope)
	h.idle()
	if got := holding(); len(got) != 0 {
		t.Errorf("after forget me, still held: %v", got)
	}
	if _, err := blobs.GetBlob(context.Background(), hash); !errors.Is(err, core.ErrBlobNotFound) {
		t.Errorf("the image's blob survived: %v", err)
	}
	h.verify("C1")
}

// Retention redacts old records of files and deletes their images' blobs.
func TestRetentionErasesSharedFiles(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("Looked at it."))
	h := newHarness(t, m, nil)
	_, _, blobs := withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "look")
	ev.Attachments = shared()[:1]
	h.deliver(ev)
	h.idle()
	done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
	if len(done) != 1 || done[0].Attachments[0].Image == nil {
		t.Fatalf("no files record: %+v", done)
	}
	hash := done[0].Attachments[0].Image.SHA256
	h.clk.Advance(72 * time.Hour)
	if _, err := h.e.Retain(t.Context(), 24*time.Hour, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.GetBlob(context.Background(), hash); !errors.Is(err, core.ErrBlobNotFound) {
		t.Errorf("the image's blob survived retention: %v", err)
	}
	for _, c := range h.j.All(chanScope("C1").Key()) {
		if strings.Contains(string(c.RawPayload()), hash) {
			t.Errorf("%s still names the image", c)
		}
	}
}

// `export my data` carries what the model saw of the person's files with
// their message: the CSV's text and the image's hash, not its bytes.
func TestExportCarriesSharedFiles(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("ok"))
	h := newHarness(t, m, nil)
	withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "look")
	ev.Attachments = shared()[:2]
	h.deliver(ev)
	h.idle()
	out, err := h.e.ExportData(context.Background(), platform, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Channels []struct {
			Messages []struct {
				Text  string
				Files []core.AttachmentSeen
			}
		}
	}
	if err := json.Unmarshal(out, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Channels) != 1 || len(exp.Channels[0].Messages) != 1 {
		t.Fatalf("export %s", out)
	}
	files := exp.Channels[0].Messages[0].Files
	if len(files) != 2 || files[0].Image == nil || files[0].Image.SHA256 == "" || !strings.Contains(files[1].Text, "1017,cust17") {
		t.Errorf("files in the export: %+v", files)
	}
}

type fakeTranscriber struct{}

func (fakeTranscriber) Transcribe(context.Context, string, string, []byte) (string, error) {
	return "please pin it in payments", nil
}

// A voice note is transcribed and the transcript is shown to the person
// on the checklist; the model gets it fenced as a transcript.
func TestVoiceNoteTranscriptIsShown(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("Looking."))
	h := newHarness(t, m, nil)
	fs, _, _ := withFiles(t, h)
	fs.files["voice"] = attachmentstest.OggVoice()
	h.cfg.Attachments = attachments.New(attachments.Config{Transcriber: fakeTranscriber{}})
	h.start()
	ev := h.mention(alice, "C1", "")
	ev.Attachments = []core.Attachment{{ID: "V1", Name: "voice.ogg", Kind: "voice", Type: "audio/ogg", Ref: "voice"}}
	h.deliver(ev)
	h.idle()
	if !strings.Contains(lastFiles(m.Views()[0]), `kind="transcript of the voice/audio">`+"\nplease pin it in payments") {
		t.Errorf("model view: %s", lastFiles(m.Views()[0]))
	}
	if !shown(h, `heard: \"please pin it in payments\"`) && !shown(h, `heard: "please pin it in payments"`) {
		t.Errorf("the transcript was not shown to the person: %+v", h.s.Edits())
	}
}

// pinTool is a write tool whose target is a channel: a channel the person
// did not name needs an approval (the gate's rule 3).
func pinTool(log *toolLog) core.Tool {
	return core.Tool{Name: "pin_in", Description: "pin a note in a channel", Consequence: core.Write, Targets: []string{"channel"},
		Schema: json.RawMessage(`{"type":"object","properties":{"channel":{"type":"string"}},"required":["channel"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			log.add(string(args))
			return core.Observation{Text: "pinned", Trust: core.Trusted}, nil
		}}
}

// The gate reads a voice note's transcript as the requester's words: a
// channel they said is theirs, as if typed; the same words in an audio
// file (not a voice note) are data, and the gate asks first.
func TestVoiceNoteNamesATargetForTheGate(t *testing.T) {
	for _, c := range []struct {
		kind     string
		executed bool
	}{{"voice", true}, {"audio", false}} {
		t.Run(c.kind, func(t *testing.T) {
			log := &toolLog{}
			m := coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("p", "pin_in", `{"channel":"payments"}`)),
				coretest.Text("Done."),
			)
			h := newHarness(t, m, []core.Tool{pinTool(log)})
			fs, _, _ := withFiles(t, h)
			fs.files["voice"] = attachmentstest.OggVoice()
			h.cfg.Attachments = attachments.New(attachments.Config{Transcriber: fakeTranscriber{}})
			h.start()
			ev := h.mention(alice, "C1", "")
			ev.Attachments = []core.Attachment{{ID: "V1", Name: "note.ogg", Kind: c.kind, Type: "audio/ogg", Ref: "voice"}}
			h.deliver(ev)
			h.idle()
			if got := len(log.get()) == 1; got != c.executed {
				t.Errorf("executed without approval: %v, want %v (cards %d)", got, c.executed, len(h.s.Cards()))
			}
		})
	}
}

// Each file's estimated tokens count against what is left of the run's
// token budget: a file past it is not shown, and the model and the
// checklist say why.
func TestFilesCountAgainstTheTokenBudget(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("ok"))
	h := newHarness(t, m, nil, func(c *engine.Config) { c.Budgets.MaxTokens = 600 })
	withFiles(t, h)
	h.start()
	ev := h.mention(alice, "C1", "look")
	ev.Attachments = shared()[:2] // an 800×450 image (~480 tokens), then a CSV (~225)
	h.deliver(ev)
	h.idle()
	done := payloads[*core.ToolCompleted](h, "C1", core.KindToolCompleted)
	if len(done) != 1 || len(done[0].Attachments) != 2 {
		t.Fatalf("%+v", done)
	}
	img, csv := done[0].Attachments[0], done[0].Attachments[1]
	if img.Kind != core.SeenImage || csv.Kind != core.SeenUnreadable || !strings.Contains(csv.Note, "token budget") || csv.Text != "" {
		t.Errorf("image %s, csv %s %q", img.Kind, csv.Kind, csv.Note)
	}
	if !shown(h, "Could not read orders.csv (not shown: it would take about") {
		t.Error("the checklist does not say the CSV was left out")
	}
}
