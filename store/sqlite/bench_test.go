package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/marlowe-bot/marlowe/core/journaltest"
)

// BenchmarkAppend: 16 channels appending at once, durable commits
// (synchronous=FULL). SQLite has one writer, so this measures how fast
// commits queue through it.
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("channels=16/batch=%d", batch), func(b *testing.B) {
			s := open(b, filepath.Join(b.TempDir(), "bench.db"), journaltest.NewSigner(b))
			journaltest.BenchAppend(b, s, 16, batch)
		})
	}
}

// BenchmarkVerify: core.VerifyChannel over 20k commands read from SQLite,
// beside the store's read alone and raw ed25519 on all cores.
func BenchmarkVerify(b *testing.B) {
	signer := journaltest.NewSigner(b)
	s := open(b, filepath.Join(b.TempDir(), "verify.db"), signer)
	ch := journaltest.FillChannel(b, s, 20000)
	b.Run("VerifyChannel/n=20000", func(b *testing.B) { journaltest.BenchVerify(b, s, signer.Verifier(), ch) })
	b.Run("VerifyVsRaw/n=20000", func(b *testing.B) { journaltest.BenchVerifyVsRaw(b, s, signer.Verifier(), ch) })
	b.Run("Read/n=20000", func(b *testing.B) { journaltest.BenchRead(b, s, ch) })
	b.Run("RawEd25519Parallel", journaltest.BenchRawVerify)
}
