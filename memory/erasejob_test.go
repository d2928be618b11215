package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// gatedStore is the rig's SQLite store whose redacting writes (a Redact,
// or a RedactBatch of many) wait, after the first `pass` of them, until
// the test opens the gate (or the caller's context ends): the erasure job
// caught in the middle.
type gatedStore struct {
	*sqlite.Store
	mu      sync.Mutex
	pass    int
	open    chan struct{}
	stopped chan struct{} // closed when the first redaction waits
	once    sync.Once
	// inDelivery counts redactions made with a click delivery's context
	// (deliveryKey): erasing inside the delivery, under its deadline.
	inDelivery int
}

// deliveryKey marks the context a test delivers a click with.
type deliveryKey struct{}

func newGatedStore(st *sqlite.Store, pass int) *gatedStore {
	return &gatedStore{Store: st, pass: pass, open: make(chan struct{}), stopped: make(chan struct{})}
}

func (g *gatedStore) Redact(ctx context.Context, seq uint64, record core.Draft) (core.Command, error) {
	if err := g.gate(ctx); err != nil {
		return core.Command{}, fmt.Errorf("redact seq %d: %w", seq, err)
	}
	return g.Store.Redact(ctx, seq, record)
}

func (g *gatedStore) RedactBatch(ctx context.Context, reds []core.Redaction) ([]core.Command, error) {
	if err := g.gate(ctx); err != nil {
		return nil, fmt.Errorf("redact %d: %w", len(reds), err)
	}
	return g.Store.RedactBatch(ctx, reds)
}

// gate lets one redacting write through, or holds it.
func (g *gatedStore) gate(ctx context.Context) error {
	g.mu.Lock()
	if ctx.Value(deliveryKey{}) != nil {
		g.inDelivery++
		g.mu.Unlock()
		return fmt.Errorf("refused inside the click's delivery")
	}
	wait := g.pass <= 0
	g.pass--
	g.mu.Unlock()
	if wait {
		g.once.Do(func() { close(g.stopped) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// rigOn replaces the rig's engine with one over j (same store, memory
// index and surface kind).
func (r *forgetRig) rigOn(j core.Journal) {
	r.t.Helper()
	_ = r.e.Close()
	svc, e, surface := startChatEngine(r.t, j, r.b, sqlite.NewMemoryIndex(r.store), []core.Operator{{Platform: "test", UserID: "UOPS"}})
	r.svc, r.e, r.surface = svc, e, surface
}

// The click on Erase answers at once: its delivery journals the request's
// job and returns while the job has not erased anything yet (every
// redaction waits at the gate). Opened, the job finishes in the
// background, posts what it did in the DM, and nothing of her text is left.
func TestForgetMeAnswersAtOnceAndErasesInTheBackground(t *testing.T) {
	r := newForgetRig(t)
	g := newGatedStore(r.store, 0)
	r.rigOn(g)
	secret := longText(4, 300)
	for i := range 30 {
		r.say(fmt.Sprintf("C%d", i%5), "UALICE", fmt.Sprintf("%d %s", i, secret))
	}
	r.say("DALICE", "UALICE", "forget me")
	card := r.card("DALICE")
	var tok string
	for _, a := range card.Actions {
		if a.ID == "erase" {
			tok = a.Token
		}
	}
	click := core.CardClick{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: "DALICE"}, Card: card.ID, Action: "erase", Token: tok, By: core.Person{ID: "UALICE"}}
	if err := r.e.Deliver(context.WithValue(t.Context(), deliveryKey{}, true), core.Inbound{Click: &click}); err != nil {
		t.Fatal(err)
	}
	if g.inDelivery > 0 {
		t.Fatalf("the click's delivery tried %d redactions itself", g.inDelivery)
	}
	// Delivered: the job is journaled, nothing erased.
	<-g.stopped
	if n := r.count(core.KindCommandRedacted, ""); n != 0 {
		t.Fatalf("the click's delivery erased %d records itself", n)
	}
	if r.count(core.KindRunStarted, "") == 0 {
		t.Fatal("no job journaled with the confirmation")
	}
	close(g.open)
	r.idle()
	var posts []string
	for _, p := range r.surface.Posts() {
		if p.Ref.Scope.Channel == "DALICE" {
			posts = append(posts, p.Out.Text)
		}
	}
	all := strings.Join(posts, "\n")
	if !strings.Contains(all, "erasing in the background") || !strings.Contains(all, "Erased your messages") {
		t.Fatalf("the DM does not say it started and what it erased:\n%s", all)
	}
	if held := r.piecesHeld(secret); len(held) > 0 {
		t.Errorf("after the job, rows hold pieces of Alice's text:\n%s", strings.Join(held, "\n"))
	}
	r.verify()
}

// The job survives a restart: the engine stops while the job waits in the
// middle of its work (two redacting writes made, some records erased, not
// all); a new engine on the same journal resumes it from the journal,
// finishes it, and reports once.
func TestForgetMeJobResumesAfterARestart(t *testing.T) {
	r := newForgetRig(t)
	secret := longText(5, 300)
	for i := range 20 {
		r.say(fmt.Sprintf("C%d", i%4), "UALICE", fmt.Sprintf("%d %s", i, secret))
	}
	g := newGatedStore(r.store, 2)
	r.rigOn(g)
	r.say("DALICE", "UALICE", "forget me")
	card := r.card("DALICE")
	var tok string
	for _, a := range card.Actions {
		if a.ID == "erase" {
			tok = a.Token
		}
	}
	click := core.CardClick{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: "DALICE"}, Card: card.ID, Action: "erase", Token: tok, By: core.Person{ID: "UALICE"}}
	if err := r.e.Deliver(context.WithValue(t.Context(), deliveryKey{}, true), core.Inbound{Click: &click}); err != nil {
		t.Fatal(err)
	}
	if g.inDelivery > 0 {
		t.Fatalf("the click's delivery tried %d redactions itself", g.inDelivery)
	}
	<-g.stopped
	if err := r.e.Close(); err != nil { // the replica stops mid-job
		t.Fatal(err)
	}
	done := r.count(core.KindCommandRedacted, "")
	if done == 0 || len(r.piecesHeld(secret)) == 0 {
		t.Fatalf("the test needs the job stopped partway: %d redactions", done)
	}
	r.rigOn(r.store) // restart: Start resumes the unfinished job
	r.idle()
	reports := 0
	for _, p := range r.surface.Posts() {
		if p.Ref.Scope.Channel == "DALICE" && strings.Contains(p.Out.Text, "Erased your messages") {
			reports++
		}
	}
	if reports != 1 {
		t.Fatalf("after the restart the job reported %d times, want once", reports)
	}
	if held := r.piecesHeld(secret); len(held) > 0 {
		t.Errorf("after the resumed job, rows hold pieces of Alice's text:\n%s", strings.Join(held, "\n"))
	}
	r.verify()
}
