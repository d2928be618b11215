package postgres_test

import (
	"fmt"
	"testing"

	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// BenchmarkAppend: 16 channels appending at once, durable commits, with
// the store's default pool (16 connections) and with pgx's default on a
// small machine (4).
func BenchmarkAppend(b *testing.B) {
	for _, conns := range []int{0, 4} {
		for _, batch := range []int{1, 8} {
			name := fmt.Sprintf("channels=16/batch=%d/conns=%d", batch, conns)
			if conns == 0 {
				name = fmt.Sprintf("channels=16/batch=%d/conns=default", batch)
			}
			b.Run(name, func(b *testing.B) {
				url := testpg.New(b)
				if conns > 0 {
					url = testpg.Pooled(url, conns)
				}
				s := open(b, url, journaltest.NewSigner(b))
				journaltest.BenchAppend(b, s, 16, batch)
			})
		}
	}
}

// BenchmarkVerify: core.VerifyChannel over 20k commands read from
// PostgreSQL, beside the store's read alone and raw ed25519 on all cores.
func BenchmarkVerify(b *testing.B) {
	url := testpg.New(b)
	signer := journaltest.NewSigner(b)
	s := open(b, url, signer)
	ch := journaltest.FillChannel(b, s, 20000)
	b.Run("VerifyChannel/n=20000", func(b *testing.B) { journaltest.BenchVerify(b, s, signer.Verifier(), ch) })
	b.Run("VerifyVsRaw/n=20000", func(b *testing.B) { journaltest.BenchVerifyVsRaw(b, s, signer.Verifier(), ch) })
	b.Run("Read/n=20000", func(b *testing.B) { journaltest.BenchRead(b, s, ch) })
	b.Run("RawEd25519Parallel", journaltest.BenchRawVerify)
}
