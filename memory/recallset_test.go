package memory_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
)

type recallSet struct {
	Memories []string `json:"memories"`
	Queries  []struct {
		Q      string `json:"q"`
		Answer *int   `json:"answer"`
	} `json:"queries"`
}

// recallSetDims is the test embedder's dimension for the labelled set:
// larger than the suite's 64 so hash collisions add less noise.
const recallSetDims = 256

func loadRecallSet(t *testing.T) recallSet {
	t.Helper()
	b, err := os.ReadFile("testdata/recall_set.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs recallSet
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestRecallSetFloorSeparatesBands scores the labelled set: for a query
// whose answer is stored, the answer's similarity; for one whose answer is
// not stored, the best (wrong) similarity. The default floor must sit
// between the two bands, and the sweep shows where the knee is.
func TestRecallSetFloorSeparatesBands(t *testing.T) {
	rs := loadRecallSet(t)
	emb := memorytest.NewEmbedder(recallSetDims)
	mv := make([][]float32, len(rs.Memories))
	for i, m := range rs.Memories {
		mv[i] = emb.Vector(m)
	}
	var stored, missing []float64
	for _, q := range rs.Queries {
		qv := emb.Vector(q.Q)
		best, bestAt := -1.0, -1
		for i := range mv {
			if s := memorytest.Cosine(qv, mv[i]); s > best {
				best, bestAt = s, i
			}
		}
		if q.Answer == nil {
			missing = append(missing, best)
			if best >= memory.DefaultFloor {
				t.Errorf("not stored %q: nearest %q at %.3f, over the floor", q.Q, rs.Memories[bestAt], best)
			}
			continue
		}
		sim := memorytest.Cosine(qv, mv[*q.Answer])
		stored = append(stored, sim)
		if sim < memory.DefaultFloor {
			t.Errorf("stored %q: answer at %.3f, under the floor", q.Q, sim)
		}
		if bestAt != *q.Answer {
			t.Errorf("stored %q: nearest is %q (%.3f), not the answer (%.3f)", q.Q, rs.Memories[bestAt], best, sim)
		}
	}
	slices.Sort(stored)
	slices.Sort(missing)
	t.Logf("answer stored (n=%d):     min %.3f  p25 %.3f  median %.3f  max %.3f", len(stored), stored[0], q(stored, 0.25), q(stored, 0.5), stored[len(stored)-1])
	t.Logf("answer not stored (n=%d): min %.3f  median %.3f  p75 %.3f  max %.3f", len(missing), missing[0], q(missing, 0.5), q(missing, 0.75), missing[len(missing)-1])
	t.Logf("default floor %.2f: margin %.3f above the not-stored band, %.3f below the stored band",
		memory.DefaultFloor, memory.DefaultFloor-missing[len(missing)-1], stored[0]-memory.DefaultFloor)
	var sweep strings.Builder
	for f := 0.10; f <= 0.701; f += 0.05 {
		right := 0
		for _, s := range stored {
			if s >= f {
				right++
			}
		}
		for _, s := range missing {
			if s < f {
				right++
			}
		}
		fmt.Fprintf(&sweep, " %.2f:%d/%d", f, right, len(stored)+len(missing))
	}
	t.Logf("floor sweep (retrieve-or-not decisions right):%s", sweep.String())
}

func q(sorted []float64, p float64) float64 { return sorted[int(p*float64(len(sorted)-1)+0.5)] }

// TestRecallSetEndToEnd runs the labelled set through the service (hybrid
// recall, floor, budget): a stored answer is among the injected snippets;
// for a query with no stored answer the dense cue injects nothing, and only
// a real word match can (reported).
func TestRecallSetEndToEnd(t *testing.T) {
	rs := loadRecallSet(t)
	signer := coretest.NewSigner(t)
	svc, err := memory.New(memory.Config{Journal: coretest.NewMemJournal(signer), Boundary: core.NewBoundary(nil),
		Index: memorytest.NewMemIndex(), Embedder: memorytest.NewEmbedder(recallSetDims)})
	if err != nil {
		t.Fatal(err)
	}
	ch := svc.For("test/w/recallset")
	ids := make([]string, len(rs.Memories))
	for i, m := range rs.Memories {
		if ids[i], err = ch.Remember(t.Context(), m, core.Provenance{Origin: fmt.Sprint("o", i)}); err != nil {
			t.Fatal(err)
		}
	}
	found, top1, lexicalOnly := 0, 0, 0
	nStored := 0
	for _, qq := range rs.Queries {
		r, err := ch.RecallResult(t.Context(), qq.Q, 0)
		if err != nil {
			t.Fatal(err)
		}
		if qq.Answer != nil {
			nStored++
			got := make([]string, len(r.Snippets))
			for i, s := range r.Snippets {
				got[i] = s.ID
			}
			if i := slices.Index(got, ids[*qq.Answer]); i >= 0 {
				found++
				if i == 0 {
					top1++
				}
			} else {
				t.Errorf("stored %q: answer not injected (got %d snippets)", qq.Q, len(got))
			}
			continue
		}
		for _, s := range r.Snippets {
			if s.Dense {
				t.Errorf("not stored %q: %q injected by the dense cue at %.3f", qq.Q, s.Text, s.Similarity)
			}
			lexicalOnly++
			t.Logf("not stored %q: lexical match %q injected", qq.Q, s.Text)
		}
	}
	t.Logf("end to end: answer injected for %d/%d stored queries (%d first); %d lexical-only snippets injected for the %d not-stored queries",
		found, nStored, top1, lexicalOnly, len(rs.Queries)-nStored)
}
