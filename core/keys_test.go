package core

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// legacySeal signs c as the journal did before key ids: no key field.
func legacySeal(t *testing.T, s *Signer, d Draft, seq uint64, prev Hash) Command {
	t.Helper()
	c, err := s.Seal(d, seq, prev)
	if err != nil {
		t.Fatal(err)
	}
	c.key = ""
	c.sig = ed25519.Sign(s.key, c.CanonicalHeader())
	return c
}

// TestHeaderWithoutKeyIsTheOldHeader pins the upcast: a row written before
// key ids must produce exactly the bytes it was signed over, so the key
// field is absent, not empty, when there is no key id.
func TestHeaderWithoutKeyIsTheOldHeader(t *testing.T) {
	at := time.UnixMicro(1700000000123456).UTC()
	c := Command{seq: 7, id: "01ID", kind: KindRunCompleted, v: 1,
		actor: Actor{Type: ActorSystem, ID: "op"}, scope: testScope, run: "R1", cause: "01C", at: at}
	actor, scope := mustJSON(t, c.actor), mustJSON(t, c.scope)
	old := `{"seq":7,"id":"01ID","kind":"run.completed","v":1,"actor":` + actor + `,"scope":` + scope +
		`,"run":"R1","cause":"01C","at":1700000000123456,"payload_hash":"` + Hash{}.String() + `","prev":"` + Hash{}.String() + `"}`
	if got := string(c.CanonicalHeader()); got != old {
		t.Fatalf("keyless header\n got %s\nwant %s", got, old)
	}
	c.key = "0123456789abcdef"
	if got := string(c.CanonicalHeader()); got != strings.TrimSuffix(old, "}")+`,"key":"0123456789abcdef"}` {
		t.Fatalf("keyed header %s", got)
	}
}

func TestKeyID(t *testing.T) {
	s := testSigner(t)
	sum := sha256.Sum256(s.Public())
	if s.KeyID() != hex.EncodeToString(sum[:8]) || len(s.KeyID()) != KeyIDLen {
		t.Fatalf("key id %q, want the first 16 hex digits of sha256(public key)", s.KeyID())
	}
	d, _ := NewBoundary(nil).System("op", testScope, Meta{}, &RunCompleted{})
	c, err := s.Seal(d, 1, Hash{})
	if err != nil || c.Key() != s.KeyID() {
		t.Fatalf("sealed command names key %q (%v), want %q", c.Key(), err, s.KeyID())
	}
}

// TestVerifierKeys: a keyed row is checked with its key only; a legacy row
// verifies against any trusted key and fails when none is its signer.
func TestVerifierKeys(t *testing.T) {
	a, b, c := testSigner(t), testSigner(t), testSigner(t)
	bd := NewBoundary(nil)
	d, _ := bd.System("op", testScope, Meta{}, &RunCompleted{Summary: "x"})
	keyed, _ := a.Seal(d, 1, Hash{})
	legacy := legacySeal(t, a, d, 1, Hash{})

	ab, err := NewVerifier(b.Public(), a.Public(), b.Public())
	if err != nil {
		t.Fatal(err)
	}
	if ids := ab.KeyIDs(); len(ids) != 2 || ids[0] != b.KeyID() || ids[1] != a.KeyID() {
		t.Fatalf("key ids %v: want b, a without the duplicate", ids)
	}
	for name, cmd := range map[string]Command{"keyed": keyed, "legacy": legacy} {
		if err := ab.Verify(cmd); err != nil {
			t.Fatalf("%s row with its key trusted: %v", name, err)
		}
	}
	bc, _ := NewVerifier(b.Public(), c.Public())
	var uk *UntrustedKeyError
	if err := bc.Verify(keyed); !errors.As(err, &uk) || uk.Key != a.KeyID() {
		t.Fatalf("keyed row, key not trusted: %v", err)
	}
	if err := bc.Verify(legacy); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("legacy row, signer not trusted: %v", err)
	}
	// A keyed row whose key field names another trusted key fails: the id
	// is signed.
	moved := keyed
	moved.key = b.KeyID()
	if err := ab.Verify(moved); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("key id moved to another trusted key: %v", err)
	}
	if _, err := NewVerifier(); err == nil {
		t.Fatal("verifier without keys accepted")
	}
	if _, err := NewVerifier(ed25519.PublicKey(make([]byte, 31))); err == nil {
		t.Fatal("short public key accepted")
	}
}

// TestChainVerifierRedactions works on loaded Commands, so the redacted flag
// can be set the way a store would read it.
func TestChainVerifierRedactions(t *testing.T) {
	s := testSigner(t)
	bd := NewBoundary(nil)
	build := func(redact ...uint64) []Command {
		var out []Command
		prev := Hash{}
		for i := 1; i <= 4; i++ {
			d, _ := bd.System("op", testScope, Meta{}, &RunCompleted{Summary: strings.Repeat("y", i)})
			c, _ := s.Seal(d, uint64(i), prev)
			prev = c.Hash()
			out = append(out, c)
		}
		for _, seq := range redact {
			d, _ := bd.System("op", testScope, Meta{}, &CommandRedacted{Seq: seq, ID: out[seq-1].id})
			c, _ := s.Seal(d, uint64(len(out)+1), prev)
			prev = c.Hash()
			out = append(out, c)
		}
		return out
	}
	mark := func(cmds []Command, seq uint64) {
		r := cmds[seq-1].Record()
		r.Payload, r.Redacted = nil, true
		c, err := FromRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		cmds[seq-1] = c
	}
	run := func(cmds []Command) error {
		cv := NewChainVerifier(s.Verifier(), testScope.Key())
		for _, c := range cmds {
			if err := cv.Next(c); err != nil {
				return err
			}
		}
		return cv.Finish()
	}
	ok := build(2)
	mark(ok, 2)
	if err := run(ok); err != nil {
		t.Fatalf("redaction with its record: %v", err)
	}
	silent := build(2)
	mark(silent, 2)
	mark(silent, 3)
	var ce *ChainError
	if err := run(silent); !errors.As(err, &ce) || ce.Seq != 3 {
		t.Fatalf("silent redaction of seq 3: %v", err)
	}
	// A record that comes before its target does not account for it.
	later, _ := bd.System("op", testScope, Meta{}, &RunCompleted{Summary: "later"})
	d, _ := bd.System("op", testScope, Meta{}, &CommandRedacted{Seq: 2, ID: later.ID()})
	early, _ := s.Seal(d, 1, Hash{})
	target, _ := s.Seal(later, 2, early.Hash())
	pair := []Command{early, target}
	mark(pair, 2)
	if err := run(pair); !errors.As(err, &ce) || ce.Seq != 2 {
		t.Fatalf("record before its target: %v", err)
	}
	// Wrong id in the record: the row stays unaccounted for.
	wrong := build()
	d, _ = bd.System("op", testScope, Meta{}, &CommandRedacted{Seq: 2, ID: "01OTHER"})
	rec, _ := s.Seal(d, 5, wrong[3].Hash())
	wrong = append(wrong, rec)
	mark(wrong, 2)
	if err := run(wrong); !errors.As(err, &ce) || ce.Seq != 2 {
		t.Fatalf("record naming another id: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
