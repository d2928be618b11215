package core

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestChanViewResetIsFresh: eviction's reset leaves every field of the fold
// as newChanView makes it. Every field must be populated first, so a field
// added to chanView later fails here until the fold below fills it (and
// reset clears it).
func TestChanViewResetIsFresh(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBoundary(nil)
	sc := Scope{Platform: "test", Workspace: "W", Channel: "C"}
	ann := Person{ID: "U1", Name: "Ann"}
	thread := sc
	thread.Thread = "M1"
	var drafts []Draft
	add := func(d Draft, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	add(b.Human(ann, sc, Meta{}, &PolicyChanged{Policy: Policy{ThreadWindowS: 60}}))
	add(b.Human(ann, sc, Meta{}, &ConsentGranted{ConsentID: "g1", Tool: "send", Owner: ann.ID}))
	add(b.Human(ann, sc, Meta{}, &ConsentGranted{ConsentID: "g2", Tool: "send", Owner: ann.ID}))
	add(b.Human(ann, sc, Meta{}, &ConsentRevoked{ConsentID: "g2", Tool: "send", Owner: ann.ID}))
	add(b.Human(ann, sc, Meta{Run: "r1"}, &MessageReceived{MessageID: "M1", Author: ann, Visibility: Public, Text: "hi"}))
	add(b.Agent("r1", thread, Meta{}, &RunStarted{Trigger: "M1"}))
	add(b.Agent("r1", thread, Meta{}, &ModelStep{Index: 0, Usage: Usage{InputTokens: 5}}))
	add(b.Agent("r1", thread, Meta{}, &ApprovalRequested{ApprovalID: "a1", Tool: "send", ExpiresAt: time.Now().Add(time.Hour)}))
	add(b.Agent("r1", thread, Meta{}, &MessagePosted{EffectID: "e1", MessageID: "B1", Role: RoleAnswer, Text: "hello"}))

	v := newChanView(sc.Key(), nil)
	var prev Hash
	for i, d := range drafts {
		c, err := signer.Seal(d, uint64(i+1), prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = c.Hash()
		if err := v.apply(c); err != nil {
			t.Fatal(err)
		}
	}
	v.loaded = true
	v.foreign, v.woke = 3, 2 // as after catching up with another replica's appends

	skip := map[string]bool{"mu": true, "key": true, "j": true, "touched": true}
	rv, fresh := reflect.ValueOf(v).Elem(), reflect.ValueOf(newChanView(sc.Key(), nil)).Elem()
	for i := range rv.NumField() {
		name, f := rv.Type().Field(i).Name, rv.Field(i)
		if skip[name] {
			continue
		}
		empty := f.IsZero()
		if k := f.Kind(); k == reflect.Map || k == reflect.Slice {
			empty = f.Len() == 0
		}
		if empty {
			t.Errorf("field %s is empty before reset: populate it above so the test checks reset clears it", name)
		}
	}
	v.reset()
	for i := range rv.NumField() {
		name := rv.Type().Field(i).Name
		if skip[name] {
			continue
		}
		if got, want := fmt.Sprintf("%v", rv.Field(i)), fmt.Sprintf("%v", fresh.Field(i)); got != want {
			t.Errorf("after reset, %s = %s, want %s (as newChanView makes it)", name, got, want)
		}
	}
}
