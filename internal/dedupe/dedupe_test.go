package dedupe_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/dedupe/dedupetest"
)

func TestMemoryConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T) dedupetest.Deduper { return dedupe.NewMemory(nil) })
}

func TestMemoryBounded(t *testing.T) {
	now := time.Unix(0, 0)
	d := dedupe.NewMemory(func() time.Time { return now })
	for i := range 10000 {
		tok, _, _ := d.Claim(t.Context(), strings.Repeat("k", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), time.Second)
		_ = d.Commit(t.Context(), "x"+time.Duration(i).String(), tok, 10*time.Minute)
		now = now.Add(time.Second)
	}
	// Everything older than 10 minutes (600 s) is gone.
	if n := d.Len(); n > 1300 {
		t.Fatalf("%d keys held after 10000 s of traffic", n)
	}
}

var _ dedupe.Deduper = (*dedupe.Memory)(nil)
