package core

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func randomWords(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for b.Len() < n {
		w := make([]byte, 2+r.IntN(7))
		for i := range w {
			w[i] = byte('a' + r.IntN(26))
		}
		b.Write(w)
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String()[:n])
}

// What an erasure must find, and what it must leave: every copy the bot
// makes of a text (whole, cut to a turn's 1,500 characters, a 40-character
// quote inside a tool call's JSON arguments, re-cased and re-spaced), and
// nothing that shares less than a piece with it.
func TestTextMatcherFindsEveryPiece(t *testing.T) {
	long := randomWords(1, 3000)
	short := "the vault code is 7731"
	m := NewTextMatcher(long, short)
	args, _ := json.Marshal(map[string]string{"text": "she said: " + long[1234:1274] + " (quoted)"})
	for _, tc := range []struct {
		name string
		s    string
		want bool
	}{
		{"the whole text", long, true},
		{"a turn's cut", Truncate(long, 1500), true},
		{"the last 40 characters", "… " + long[len(long)-40:], true},
		{"a 40-character quote, re-cased and re-spaced", strings.ToUpper(strings.ReplaceAll(long[700:740], " ", "\n  ")), true},
		{"a short text, whole", "note: The Vault Code is 7731.", true},
		{"a 31-character piece", long[2000:2031], false},
		{"part of the short text", "the vault code", false},
		{"another text", randomWords(2, 3000), false},
	} {
		if got := m.MatchString(tc.s); got != tc.want {
			t.Errorf("%s: match = %v, want %v", tc.name, got, tc.want)
		}
	}
	// In a payload: JSON inside a string (a tool call's arguments) is read.
	c := Command{kind: KindToolRequested, v: 1}
	c.payload, _ = json.Marshal(&ToolRequested{Call: ToolCall{ID: "c1", Name: "post", Args: string(args)}})
	if !m.Carries(c) {
		t.Errorf("a tool call quoting 40 characters of the text is not found: %s", c.payload)
	}
	if !CarriesText(c, long) {
		t.Error("CarriesText misses the quote")
	}
}

// Restating a decision record replaces each string holding a piece.
func TestRestateReplacesPieces(t *testing.T) {
	long := randomWords(3, 2000)
	c := Command{kind: KindApprovalRequested, v: 1}
	c.payload, _ = json.Marshal(&ApprovalRequested{ApprovalID: "a1", Summary: "post " + Truncate(long, 300), Question: "keep?"})
	out, changed, err := Restate(c, []string{long})
	if err != nil || !changed {
		t.Fatalf("restate: %v, changed %v", err, changed)
	}
	if strings.Contains(string(out), long[:40]) || !strings.Contains(string(out), ErasedText) || !strings.Contains(string(out), "keep?") {
		t.Fatalf("restated: %s", out)
	}
}

func BenchmarkTextMatcherCarries(b *testing.B) {
	var texts []string
	for i := range 10000 {
		texts = append(texts, randomWords(uint64(i), 200))
	}
	m := NewTextMatcher(texts...)
	c := Command{kind: KindMessagePosted, v: 1}
	c.payload, _ = json.Marshal(&MessagePosted{EffectID: "e", MessageID: "m", Text: randomWords(99999, 600)})
	b.ReportAllocs()
	for b.Loop() {
		if m.Carries(c) {
			b.Fatal(fmt.Sprint("unexpected match"))
		}
	}
}
