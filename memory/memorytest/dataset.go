package memorytest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/memory"
)

// Dataset is a synthetic memory corpus for benchmarks and plan checks:
// channels × perChannel memories of 8–14 words drawn (Zipf-like) from a
// vocabulary of pronounceable made-up words, embedded with Embedder.
type Dataset struct {
	Channels []core.ChannelKey
	Entries  []memory.Entry
	Vectors  []memory.Vector
	Emb      *Embedder
	texts    [][]string // per channel
	rng      *rand.Rand
}

// NewDataset builds the corpus deterministically from seed.
func NewDataset(channels, perChannel, dims int, seed uint64) *Dataset {
	rng := rand.New(rand.NewPCG(seed, 0x6d656d))
	vocab := vocabulary(4000, rng)
	zipf := rand.NewZipf(rng, 1.1, 4, uint64(len(vocab)-1))
	d := &Dataset{Emb: NewEmbedder(dims), rng: rng, texts: make([][]string, channels)}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d.Entries = make([]memory.Entry, 0, channels*perChannel)
	d.Vectors = make([]memory.Vector, 0, channels*perChannel)
	for c := range channels {
		ch := core.ChannelKey(fmt.Sprintf("bench/w/c%02d", c))
		d.Channels = append(d.Channels, ch)
		for i := range perChannel {
			words := make([]string, 8+rng.IntN(7))
			for w := range words {
				words[w] = vocab[zipf.Uint64()]
			}
			text := strings.Join(words, " ")
			id := fmt.Sprintf("B%02d%08d", c, i)
			d.texts[c] = append(d.texts[c], text)
			d.Entries = append(d.Entries, memory.Entry{
				ID: id, Channel: ch, Seq: uint64(i + 1), Text: text,
				Provenance: core.Provenance{Origin: "bench-" + id, Trust: "trusted", Derivation: "bench"},
				CreatedAt:  base.Add(time.Duration(i) * time.Second),
			})
			d.Vectors = append(d.Vectors, memory.Vector{MemoryID: id, Model: d.Emb.Model(), Values: d.Emb.Vector(text)})
		}
	}
	return d
}

// QueryText is a query about memory i of channel c: four of its words and
// one unrelated word.
func (d *Dataset) QueryText(c, i int) string {
	words := strings.Fields(d.texts[c][i%len(d.texts[c])])
	d.rng.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
	words = words[:min(4, len(words))]
	return strings.Join(append(words, "zebra"), " ")
}

// Query is the index query of QueryText(c, i).
func (d *Dataset) Query(c, i int) memory.SearchQuery {
	text := d.QueryText(c, i)
	return memory.SearchQuery{Channel: d.Channels[c], Terms: memory.Terms(text), Vector: d.Emb.Vector(text), Model: d.Emb.Model(), K: memory.DefaultCandidates}
}

// vocabulary makes n distinct pronounceable words.
func vocabulary(n int, rng *rand.Rand) []string {
	cons, vows := "bdfgklmnprstvz", "aeiou"
	seen := map[string]bool{}
	out := make([]string, 0, n)
	for len(out) < n {
		var b strings.Builder
		for range 2 + rng.IntN(2) {
			b.WriteByte(cons[rng.IntN(len(cons))])
			b.WriteByte(vows[rng.IntN(len(vows))])
		}
		b.WriteByte(cons[rng.IntN(len(cons))])
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
