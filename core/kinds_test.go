package core_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// TestEveryKindIsFolded fails when a kind is added without a case in the
// channel fold.
func TestEveryKindIsFolded(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := core.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	b := core.NewBoundary(nil)
	scope := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}
	st := fold.NewChannel(scope.Key())
	for i, k := range core.Kinds() {
		d, err := b.System("test", scope, core.Meta{Run: "R1"}, core.SamplePayload(t, k))
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Seal(d, uint64(i+1), core.Hash{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Apply(c); err != nil {
			t.Errorf("fold does not handle %s: %v", k, err)
		}
	}
}
