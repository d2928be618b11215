// Package memorytest holds the conformance suite every memory.Index runs
// (store/postgres, store/sqlite, the in-process MemIndex here), a
// deterministic test embedder and an in-process index for unit tests.
package memorytest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync/atomic"

	"github.com/marlowe-bot/marlowe/memory"
)

// synonyms give the test embedder a little meaning: words mapped to one
// concept embed alike, so a query can be close to a memory it shares no
// word with (the dense cue finds what the lexical cue cannot).
var synonyms = map[string]string{
	"automobile": "car", "vehicle": "car", "cars": "car",
	"holiday": "vacation", "holidays": "vacation", "pto": "vacation", "leave": "vacation", "off": "vacation",
	"ship": "release", "deploy": "release", "deploys": "release", "deployment": "release", "launch": "release", "releases": "release", "shipping": "release",
	"standup": "meeting", "sync": "meeting", "meetings": "meeting",
	"boss": "manager", "lead": "manager", "head": "manager",
	"spend": "budget", "cost": "budget", "costs": "budget", "expenses": "budget",
	"colour": "color", "colours": "color", "colors": "color",
	"bug": "incident", "outage": "incident", "incidents": "incident", "bugs": "incident",
	"favorite": "favourite", "prefers": "favourite", "likes": "favourite", "like": "favourite", "preferred": "favourite",
	"drink": "beverage", "drinks": "beverage", "tea": "beverage", "coffee": "beverage",
	"allergic": "allergy", "allergies": "allergy",
	"password": "credential", "credentials": "credential", "token": "credential", "secret": "credential",
	"birthday": "born", "anniversary": "born",
	"freeze": "frozen", "frozen": "frozen",
	"oncall": "rota", "rotation": "rota", "roster": "rota",
	"lunch": "food", "dinner": "food", "meal": "food", "eat": "food", "eats": "food",
}

// Embedder is a deterministic bag-of-words embedder: each term (after
// memory.Terms, a synonym table and crude stemming) is hashed to eight
// signed coordinates of weight 1/√8, and the sum is normalised. Texts
// sharing words have high cosine similarity; unrelated texts are near 0
// (hash collisions add noise, spread thin over the eight coordinates and
// smaller with more dimensions). Fail makes it return errors.
type Embedder struct {
	dims  int
	model string
	fail  atomic.Bool
	calls atomic.Int64
}

var _ interface {
	Embed(context.Context, []string) ([][]float32, string, error)
} = (*Embedder)(nil)

// NewEmbedder returns an embedder of dims dimensions; its model name is
// "bow-<dims>".
func NewEmbedder(dims int) *Embedder {
	return &Embedder{dims: dims, model: fmt.Sprintf("bow-%d", dims)}
}

// WithModel returns an embedder of the same dimension under another model
// name (a "model change").
func (e *Embedder) WithModel(name string) *Embedder { return &Embedder{dims: e.dims, model: name} }

// Fail switches failure on or off.
func (e *Embedder) Fail(on bool) { e.fail.Store(on) }

// Calls counts Embed calls.
func (e *Embedder) Calls() int64 { return e.calls.Load() }

// Model is the model name Embed reports.
func (e *Embedder) Model() string { return e.model }

// ErrEmbedderDown is what a failing Embedder returns.
var ErrEmbedderDown = errors.New("test embedder: unavailable")

// Embed implements core.Embedder.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, string, error) {
	e.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if e.fail.Load() {
		return nil, "", ErrEmbedderDown
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.Vector(t)
	}
	return out, e.model, nil
}

// Vector embeds one text.
func (e *Embedder) Vector(text string) []float32 {
	v := make([]float64, e.dims)
	for _, t := range Concepts(text) {
		for k := range hashesPerTerm {
			h := fnv.New64a()
			_, _ = h.Write([]byte{byte(k)})
			_, _ = h.Write([]byte(t))
			x := h.Sum64()
			sign := 1.0
			if x&1 == 1 {
				sign = -1
			}
			v[(x>>1)%uint64(e.dims)] += sign
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, e.dims)
	if norm == 0 {
		out[0] = 1 // an empty text still gets a unit vector
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// Concepts are the embedder's features of text: memory.Terms, mapped
// through the synonym table and stemmed.
func Concepts(text string) []string {
	var out []string
	for _, t := range memory.Terms(text) {
		if s, ok := synonyms[t]; ok {
			t = s
		}
		out = append(out, stem(t))
	}
	return out
}

// hashesPerTerm is how many coordinates one term spreads over.
const hashesPerTerm = 8

func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// Cosine is the cosine similarity of two vectors of equal length.
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}
