package engine

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
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
	signer, err := core.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	b := core.NewBoundary(nil)
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: "C"}
	ann := core.Person{ID: "U1", Name: "Ann"}
	thread := sc
	thread.Thread = "M1"
	var drafts []core.Draft
	add := func(d core.Draft, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	add(b.Human(ann, sc, core.Meta{}, &core.PolicyChanged{Policy: core.Policy{ThreadWindowS: 60}}))
	add(b.Human(ann, sc, core.Meta{}, &core.ConsentGranted{ConsentID: "g1", Tool: "send", Owner: ann.ID}))
	add(b.Human(ann, sc, core.Meta{}, &core.ConsentGranted{ConsentID: "g2", Tool: "send", Owner: ann.ID}))
	add(b.Human(ann, sc, core.Meta{}, &core.ConsentRevoked{ConsentID: "g2", Tool: "send", Owner: ann.ID}))
	add(b.Human(ann, sc, core.Meta{Run: "r1"}, &core.MessageReceived{MessageID: "M1", Author: ann, Visibility: core.Public, Text: "hi"}))
	add(b.Agent("r1", thread, core.Meta{}, &core.RunStarted{Trigger: "M1"}))
	add(b.Agent("r1", thread, core.Meta{}, &core.ModelStep{Index: 0, Usage: core.Usage{InputTokens: 5}}))
	add(b.Agent("r1", thread, core.Meta{}, &core.ApprovalRequested{ApprovalID: "a1", Tool: "send", ExpiresAt: time.Now().Add(time.Hour)}))
	add(b.Agent("r1", thread, core.Meta{}, &core.MessagePosted{EffectID: "e1", MessageID: "B1", Role: core.RoleAnswer, Text: "hello"}))

	v := newChanView(sc.Key(), nil)
	var prev core.Hash
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

	skip := map[string]bool{"mu": true, "key": true, "j": true, "touched": true, "borrows": true, "tr": true, "traced": true, "appendFailed": true} // wiring and engine bookkeeping, not fold state
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
