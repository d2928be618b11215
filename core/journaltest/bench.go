package journaltest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// BenchAppend measures append throughput: channels goroutines, each
// appending to its own channel in batches of batch drafts, until b.N
// commands are in. It reports commands/s. Drafting happens inside the timed
// loop, as it does in the service.
func BenchAppend(b *testing.B, j core.Journal, channels, batch int) {
	bd := core.NewBoundary(nil)
	var (
		claimed atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, channels)
	)
	// Channel names are unique per call: the benchmark framework calls the
	// function again with a larger b.N on the same journal.
	run := bd.NewID()
	b.ResetTimer()
	for w := range channels {
		wg.Go(func() {
			sc := scope(fmt.Sprintf("bench-%s-%d", run, w))
			drafts := make([]core.Draft, 0, batch)
			for {
				start := claimed.Add(int64(batch)) - int64(batch)
				n := int(min(int64(batch), int64(b.N)-start))
				if n <= 0 {
					return
				}
				drafts = drafts[:0]
				for i := range n {
					d, err := newMsg(bd, sc, fmt.Sprintf("benchmark message %d", i))
					if err != nil {
						errs <- err
						return
					}
					drafts = append(drafts, d)
				}
				if _, err := j.Append(b.Context(), drafts...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}

// FillChannel appends n commands to one fresh channel in batches and
// returns its key; setup for BenchVerify.
func FillChannel(tb testing.TB, j core.Journal, n int) core.ChannelKey {
	tb.Helper()
	bd := core.NewBoundary(nil)
	sc := scope("verify-" + bd.NewID())
	const batch = 500
	for done := 0; done < n; {
		k := min(batch, n-done)
		drafts := make([]core.Draft, k)
		for i := range drafts {
			drafts[i] = msgDraft(tb, bd, sc, fmt.Sprintf("message %d of a long channel", done+i))
		}
		if _, err := j.Append(tb.Context(), drafts...); err != nil {
			tb.Fatalf("fill %s: %v", sc.Key(), err)
		}
		done += k
	}
	return sc.Key()
}

// BenchVerify measures core.VerifyChannel over ch (see FillChannel), read
// from the store, and reports commands/s.
func BenchVerify(b *testing.B, j core.Journal, v *core.Verifier, ch core.ChannelKey) {
	var n int
	b.ResetTimer()
	for b.Loop() {
		var err error
		if n, err = core.VerifyChannel(b.Context(), j, v, ch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}

// BenchVerifyVsRaw alternates, in each iteration, core.VerifyChannel over
// ch with bare ed25519.Verify of the same headers spread over every core,
// and reports verify's throughput as a percentage of the bare one. Timing
// both side by side keeps the ratio meaningful on a machine whose load
// changes between benchmarks.
func BenchVerifyVsRaw(b *testing.B, j core.Journal, v *core.Verifier, ch core.ChannelKey) {
	cmds, err := j.Read(b.Context(), ch, 1, 0)
	if err != nil {
		b.Fatal(err)
	}
	// The journal's key is not exported, so the bare check uses a key of
	// its own over the same header bytes.
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	msgs, sigs := make([][]byte, len(cmds)), make([][]byte, len(cmds))
	for i, c := range cmds {
		msgs[i] = c.CanonicalHeader()
		sigs[i] = ed25519.Sign(key, msgs[i])
	}
	workers := runtime.GOMAXPROCS(0)
	raw := func() {
		var wg sync.WaitGroup
		chunk := (len(msgs) + workers - 1) / workers
		for start := 0; start < len(msgs); start += chunk {
			wg.Go(func() {
				for i := start; i < min(start+chunk, len(msgs)); i++ {
					if !ed25519.Verify(pub, msgs[i], sigs[i]) {
						b.Error("raw verify failed")
						return
					}
				}
			})
		}
		wg.Wait()
	}
	var verifyTime, rawTime time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := core.VerifyChannel(b.Context(), j, v, ch); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		raw()
		verifyTime += t1.Sub(t0)
		rawTime += time.Since(t1)
	}
	n := float64(len(cmds) * b.N)
	b.ReportMetric(n/verifyTime.Seconds(), "verify-commands/s")
	b.ReportMetric(n/rawTime.Seconds(), "raw-verifies/s")
	b.ReportMetric(100*rawTime.Seconds()/verifyTime.Seconds(), "%-of-raw")
}

// BenchRead measures j.Read alone over ch in VerifyChannel's page size, to
// separate the store's share of verification from the signature checks.
func BenchRead(b *testing.B, j core.Journal, ch core.ChannelKey) {
	const page = 4096
	var n int
	for b.Loop() {
		n = 0
		for from := uint64(1); ; {
			cmds, err := j.Read(b.Context(), ch, from, page)
			if err != nil {
				b.Fatal(err)
			}
			n += len(cmds)
			if len(cmds) < page {
				break
			}
			from = cmds[len(cmds)-1].Seq() + 1
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}

// BenchRawVerify is the ceiling for BenchVerify: ed25519.Verify of a
// header-sized message on every core at once, reported as verifies/s.
func BenchRawVerify(b *testing.B) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	// Sign a real command's header, so the message is the size the journal
	// verifies.
	signer, err := core.NewSigner(key)
	if err != nil {
		b.Fatal(err)
	}
	c, err := signer.Seal(msgDraft(b, core.NewBoundary(nil), scope("raw"), "benchmark message"), 1, core.Hash{})
	if err != nil {
		b.Fatal(err)
	}
	msg, sig := c.CanonicalHeader(), c.Sig()
	if !ed25519.Verify(pub, msg, sig) {
		b.Fatal("header signature does not verify")
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Error("verify failed")
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifies/s")
}
