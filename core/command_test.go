package core

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

func testSigner(t testing.TB) *Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testScope = Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}

// zeroPayloadFor builds a minimal payload for k so every kind can be folded.
func samplePayload(t *testing.T, k Kind) Payload {
	t.Helper()
	p, ok := newPayload(k)
	if !ok {
		t.Fatalf("kind %s has no payload type: add it to newPayload", k)
	}
	if p.Kind() != k {
		t.Fatalf("payload %T reports kind %s, registered for %s", p, p.Kind(), k)
	}
	return p
}

// TestEveryKindHasAPayloadAndAName fails when a kind is added without a
// payload type or a name (kinds_test.go checks the fold handles each).
func TestEveryKindHasAPayloadAndAName(t *testing.T) {
	for _, k := range Kinds() {
		if k.String() == "" {
			t.Fatalf("kind %d has no name", k)
		}
		if back, err := ParseKind(k.String()); err != nil || back != k {
			t.Fatalf("ParseKind(%q) = %v, %v", k.String(), back, err)
		}
		_ = samplePayload(t, k)
	}
	if len(Kinds()) != int(kindEnd)-1 {
		t.Fatalf("Kinds() lists %d kinds, want %d", len(Kinds()), kindEnd-1)
	}
}

func TestRunStatusesAreClassified(t *testing.T) {
	for _, s := range RunStatuses() {
		_ = s.Terminal() // panics on an unclassified status
	}
}

func TestSealVerifyRoundTripThroughRecord(t *testing.T) {
	s := testSigner(t)
	b := NewBoundary(nil)
	d, err := b.Human(Person{ID: "U1"}, testScope, Meta{}, &MessageReceived{MessageID: "1.0", Author: Person{ID: "U1"}, Text: "héllo"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Seal(d, 1, Hash{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Actor(); got.Type != ActorHuman || got.ID != "U1" || got.Platform != "slack" {
		t.Fatalf("actor = %+v", got)
	}
	back, err := FromRecord(c.Record())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verifier().Verify(back); err != nil {
		t.Fatalf("verify after round trip: %v", err)
	}
	if back.Hash() != c.Hash() {
		t.Fatal("hash changed across the record round trip")
	}
	p, err := Decode[*MessageReceived](back)
	if err != nil || p.Text != "héllo" {
		t.Fatalf("decode = %+v, %v", p, err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	s := testSigner(t)
	other := testSigner(t)
	b := NewBoundary(nil)
	d, _ := b.System("op", testScope, Meta{}, &RunCompleted{Summary: "x"})
	c, _ := s.Seal(d, 1, Hash{})
	cases := map[string]func(r *Record){
		"payload":   func(r *Record) { r.Payload[len(r.Payload)-3] ^= 1 },
		"signature": func(r *Record) { r.Sig[0] ^= 1 },
		"actor":     func(r *Record) { r.Actor.ID = "someone-else" },
		"seq":       func(r *Record) { r.Seq = 2 },
		"time":      func(r *Record) { r.At = r.At.Add(time.Microsecond) },
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			r := c.Record()
			tamper(&r)
			bad, err := FromRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Verifier().Verify(bad); err == nil {
				t.Fatal("tampered command verified")
			}
		})
	}
	if err := other.Verifier().Verify(c); err == nil {
		t.Fatal("command verified under a different key")
	}
}

func TestChainVerifierNamesFirstBadSeq(t *testing.T) {
	s := testSigner(t)
	b := NewBoundary(nil)
	var cmds []Command
	prev := Hash{}
	for i := 1; i <= 5; i++ {
		d, _ := b.System("op", testScope, Meta{}, &RunCompleted{Summary: strings.Repeat("x", i)})
		c, err := s.Seal(d, uint64(i), prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = c.Hash()
		cmds = append(cmds, c)
	}
	check := func(cmds []Command, wantSeq uint64) {
		t.Helper()
		cv := NewChainVerifier(s.Verifier(), testScope.Key())
		for _, c := range cmds {
			if err := cv.Next(c); err != nil {
				var ce *ChainError
				if !errors.As(err, &ce) || ce.Seq != wantSeq {
					t.Fatalf("error %v, want first bad seq %d", err, wantSeq)
				}
				return
			}
		}
		if wantSeq != 0 {
			t.Fatalf("chain verified, want failure at %d", wantSeq)
		}
	}
	check(cmds, 0)
	check([]Command{cmds[0], cmds[1], cmds[3], cmds[4]}, 3) // deleted row
	check([]Command{cmds[0], cmds[2], cmds[1]}, 2)          // reordered
	// A sealed command from another chain position (valid sig, wrong prev).
	d, _ := b.System("op", testScope, Meta{}, &RunCompleted{})
	forged, _ := s.Seal(d, 3, Hash{})
	check([]Command{cmds[0], cmds[1], forged}, 3)
}

func TestUpcastMessageReceivedV1(t *testing.T) {
	raw := []byte(`{"user":"U7","text":"old shape"}`)
	sum := sha256.Sum256(raw)
	c, err := FromRecord(Record{Seq: 1, ID: "01", Kind: "message.received", V: 1, Scope: testScope, Payload: raw, PayloadHash: sum[:], Prev: make([]byte, 32), At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode[*MessageReceived](c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Author.ID != "U7" || p.Text != "old shape" {
		t.Fatalf("upcast = %+v", p)
	}
	if string(c.RawPayload()) != string(raw) {
		t.Fatal("upcasting rewrote the stored payload")
	}
	c2, _ := FromRecord(Record{Seq: 1, ID: "01", Kind: "message.received", V: 9, Scope: testScope, Payload: raw, PayloadHash: sum[:], Prev: make([]byte, 32)})
	if _, err := c2.Payload(); err == nil {
		t.Fatal("future payload version decoded")
	}
}

func TestBoundaryRefusesUnverifiedHumanAndBadScope(t *testing.T) {
	b := NewBoundary(nil)
	if _, err := b.Human(Person{}, testScope, Meta{}, &RunCompleted{}); err == nil {
		t.Fatal("human actor without id accepted")
	}
	if _, err := b.Agent("", testScope, Meta{}, &RunCompleted{}); err == nil {
		t.Fatal("agent without run accepted")
	}
	if _, err := b.System("x", Scope{Platform: "slack", Channel: "a/b"}, Meta{}, &RunCompleted{}); err == nil {
		t.Fatal("scope with '/' accepted")
	}
}

func TestCheckBatch(t *testing.T) {
	b := NewBoundary(nil)
	d1, _ := b.System("x", testScope, Meta{}, &RunCompleted{})
	other := testScope
	other.Channel = "C2"
	d2, _ := b.System("x", other, Meta{}, &RunCompleted{})
	if _, err := CheckBatch([]Draft{d1, d2}); !errors.Is(err, ErrMixedChannels) {
		t.Fatalf("mixed batch: %v", err)
	}
	if _, err := CheckBatch([]Draft{d1, {}}); err == nil {
		t.Fatal("zero draft accepted")
	}
}
