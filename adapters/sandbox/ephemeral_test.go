package sandbox

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// TestPostEphemeral: a message only one person sees is stored for that
// person's page (To), in the thread it was posted to, and is never
// history, never a thread root, never written to the data file.
func TestPostEphemeral(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sandbox.jsonl")
	clock := newFakeClock()
	s := newSandbox(t, Config{DataFile: file, Clock: clock.Now})
	ctx := context.Background()
	root := botPost(t, s, "root", "general", "", "root")
	thread := root.Scope
	thread.Thread = root.ID

	if err := s.PostEphemeral(ctx, thread, "carol", "Only <@bob> can approve this."); err != nil {
		t.Fatal(err)
	}
	var eph message
	for _, m := range s.msgs {
		if m.To != "" {
			eph = *m
		}
	}
	if eph.To != "carol" || eph.Channel != "general" || eph.Thread != root.ID || !eph.Bot || eph.Author != BotID || eph.Text != "Only <@bob> can approve this." {
		t.Fatalf("ephemeral stored as %+v", eph)
	}
	hist, err := s.History(ctx, thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(hist, func(e core.Event) bool { return e.MessageID == eph.ID }) {
		t.Error("an ephemeral message is in the thread's history")
	}
	asRoot := thread
	asRoot.Thread = eph.ID
	if _, err := s.Post(ctx, core.Outbound{Scope: asRoot, Text: "reply"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("posting under an ephemeral message: %v, want not found", err)
	}

	for _, tc := range []struct {
		name  string
		scope core.Scope
		user  string
		text  string
		want  error
	}{
		{"unknown person", thread, "mallory", "x", ErrNotFound},
		{"not a member of the private channel", core.Scope{Platform: Platform, Workspace: Workspace, Channel: "private-team"}, "carol", "x", errForbidden},
		{"someone else's DM", core.Scope{Platform: Platform, Workspace: Workspace, Channel: "dm-alice"}, "bob", "x", errForbidden},
		{"unknown channel", core.Scope{Platform: Platform, Workspace: Workspace, Channel: "nope"}, "bob", "x", ErrNotFound},
		{"empty text", thread, "bob", "  ", nil},
	} {
		err := s.PostEphemeral(ctx, tc.scope, tc.user, tc.text)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// A restart keeps the conversation but not the ephemeral message.
	s2 := newSandbox(t, Config{DataFile: file, Clock: clock.Now})
	if _, ok := s2.msgs[root.ID]; !ok {
		t.Fatal("the root did not survive a restart")
	}
	if _, ok := s2.msgs[eph.ID]; ok {
		t.Error("the ephemeral message survived a restart")
	}
}

// TestClickInFlightIsPerPerson: while Carol's click waits for delivery,
// the card lists her as clicking (her page disables her buttons) and a
// second click of hers is refused, but Bob can click; once deliver
// returns she is no longer listed and can click again (a refused click
// leaves the card usable). A click whose delivery fails is told to the
// clicker alone.
func TestClickInFlightIsPerPerson(t *testing.T) {
	s := newSandbox(t, Config{})
	release := make(chan struct{})
	delivered := make(chan core.CardClick, 10)
	fail := make(chan bool, 10)
	deliver := func(ctx context.Context, in core.Inbound) error {
		if in.Click == nil {
			return nil
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		delivered <- *in.Click
		if len(fail) > 0 && <-fail {
			return errors.New("journal unavailable")
		}
		return nil
	}
	base := run(t, s, deliver)
	root := botPost(t, s, "root", "general", "", "root")
	out := core.Outbound{Key: "card", Scope: root.Scope, Priority: core.PriorityHigh,
		Card: &core.Card{ID: "card-1", Title: "Approve?", Actions: []core.CardAction{{ID: "approve", Label: "Approve", Token: "t"}}}}
	out.Scope.Thread = root.ID
	ref, err := s.Post(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	click := func(person string) int {
		code, _ := postJSON(t, base+"/api/click", map[string]string{"person": person, "message": ref.ID, "action": "approve"})
		return code
	}
	clicking := func() []string { return s.message(ref.ID).Clicking }

	events, _ := stream(t, base, "")
	if ev := nextSSE(t, events); ev.Event != "hello" {
		t.Fatalf("first event %q", ev.Event)
	}
	for range 2 { // the root and the card
		decodeMsg(t, nextSSE(t, events))
	}

	if code := click("carol"); code != http.StatusAccepted {
		t.Fatalf("carol's click: %d", code)
	}
	if m := decodeMsg(t, nextSSE(t, events)); m.ID != ref.ID || !slices.Equal(m.Clicking, []string{"carol"}) {
		t.Fatalf("after carol's click the page got %+v, want the card with clicking [carol]", m)
	}
	if code := click("carol"); code != http.StatusConflict {
		t.Errorf("carol's second click while the first is in flight: %d, want 409", code)
	}
	if code := click("bob"); code != http.StatusAccepted {
		t.Errorf("bob's click while carol's is in flight: %d, want 202", code)
	}
	if got := clicking(); !slices.Equal(got, []string{"carol", "bob"}) {
		t.Errorf("clicking = %v", got)
	}

	release <- struct{}{} // carol's delivery returns
	if c := <-delivered; c.By.ID != "carol" {
		t.Fatalf("delivered %+v first", c)
	}
	for m := decodeMsg(t, nextSSE(t, events)); slices.Contains(m.Clicking, "carol"); m = decodeMsg(t, nextSSE(t, events)) {
	}
	if got := clicking(); !slices.Equal(got, []string{"bob"}) {
		t.Errorf("after carol's delivery clicking = %v, want [bob]", got)
	}
	if code := click("carol"); code != http.StatusAccepted {
		t.Errorf("carol clicks again after her first click was handled: %d, want 202", code)
	}

	// Bob's delivery returns; carol's second one fails on every retry.
	release <- struct{}{}
	<-delivered
	for range 3 {
		fail <- true
	}
	for range 3 {
		release <- struct{}{}
		<-delivered
	}
	var notice message
	for ev := nextSSE(t, events); ; ev = nextSSE(t, events) {
		if m := decodeMsg(t, ev); m.To != "" {
			notice = m
			break
		}
	}
	if notice.To != "carol" || notice.Thread != root.ID || !strings.Contains(notice.Text, "could not be delivered") || !strings.Contains(notice.Text, "journal unavailable") {
		t.Errorf("failed delivery told as %+v, want an ephemeral to carol in the thread", notice)
	}
	if got := clicking(); len(got) != 0 {
		t.Errorf("after every delivery clicking = %v", got)
	}
	if n := s.message(ref.ID).Notice; n != "" {
		t.Errorf("the card carries a notice for everyone: %q", n)
	}
}
