package attachments_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/attachments"
	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
	"github.com/marlowe-bot/marlowe/core"
)

// BenchmarkRead20MiB: time and memory to turn a ~20 MiB attachment of each
// kind into model input, beyond the download (the fetcher hands over
// bytes already in memory). peak-heap-MiB is the highest live heap above
// the baseline seen while reading (sampled every 100 µs); cpu-ms/op is the
// process's CPU time (user+system, getrusage) per file, which a shared
// machine inflates far less than ns/op (wall time); the heap sampler's own
// wake-ups are in it too.
//
//	go test -run '^$' -bench Read20MiB -benchtime 3x -benchmem ./attachments/
func BenchmarkRead20MiB(b *testing.B) {
	const size = 20 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"text":"a transcript"}`))
	}))
	defer srv.Close()
	kinds := []struct {
		name string
		data func(b *testing.B) []byte
	}{
		{"png-noise", func(b *testing.B) []byte { return noisePNG(b, size) }},
		{"png-screenshot-1080p", func(b *testing.B) []byte { return attachmentstest.Screenshot(b, 1920, 1080) }},
		{"text-log", func(*testing.B) []byte {
			return []byte(strings.Repeat("2026-12-06T01:00:00Z INFO request served in 12 ms path=/api/v1/orders\n", size/70))
		}},
		{"pdf-text", func(b *testing.B) []byte { return bigPDF(b, size) }},
		{"audio-ogg", func(*testing.B) []byte {
			v := attachmentstest.OggVoice()
			return append(v, bytes.Repeat([]byte{0x55}, size-len(v))...)
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			data := k.data(b)
			f := &files{by: map[string][]byte{"x": data}}
			r := attachments.New(attachments.Config{MaxBytes: 21 << 20, Images: true,
				Transcriber: &attachments.Whisper{BaseURL: srv.URL + "/v1", Model: "whisper-1"}})
			att := []core.Attachment{{ID: "x", Name: "file", Ref: "x"}}
			b.SetBytes(int64(len(data)))
			var peak uint64
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runtime.GC()
				base := liveHeap()
				stop := sampleHeap(&peak, base)
				b.StartTimer()
				c0 := cpuTime()
				seen := r.ReadAttachments(context.Background(), f, att)
				cpu += cpuTime() - c0
				b.StopTimer()
				stop()
				if seen[0].Kind == core.SeenUnreadable {
					b.Fatalf("%s: %s", k.name, seen[0].Note)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(len(data))/(1<<20), "file-MiB")
		})
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sampleHeap(peak *uint64, base uint64) func() {
	var done atomic.Bool
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		for !done.Load() {
			if h := liveHeap(); h > base && h-base > atomic.LoadUint64(peak) {
				atomic.StoreUint64(peak, h-base)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	return func() { done.Store(true); <-fin }
}

// noisePNG is a PNG of random pixels of about size bytes (noise does not
// compress): the worst case for decoding.
func noisePNG(b *testing.B, size int) []byte {
	side := 1
	for side*side*3 < size {
		side++
	}
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	_, _ = rand.Read(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// bigPDF is a text PDF of about size bytes: pages of text, their count
// estimated from a 50-page sample.
func bigPDF(b *testing.B, size int) []byte {
	page := strings.Repeat("Invoice line: 4711 widgets at 12.50 EUR, shipped to warehouse 9. ", 60)
	sample := make([]string, 50)
	for i := range sample {
		sample[i] = page
	}
	n := size / (len(attachmentstest.PDF(b, sample...)) / len(sample))
	pages := make([]string, n)
	for i := range pages {
		pages[i] = page
	}
	return attachmentstest.PDF(b, pages...)
}
