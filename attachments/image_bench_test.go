package attachments

import (
	"bytes"
	"image"
	"image/png"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/image/draw"

	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
)

// BenchmarkScreenshotOverhead: what a 1920×1080 PNG screenshot costs from
// its downloaded bytes to the bytes the model is given (prepareImage:
// header check, decode, scale to 1568×882, encode, hash). overhead-ms is
// the median wall time of one image (issue #34's goal: at most 50 ms),
// cpu-ms/op the process's CPU time per image, which a shared machine
// inflates far less than wall time.
//
//	go test -run '^$' -bench ScreenshotOverhead -benchtime 30x ./attachments/
func BenchmarkScreenshotOverhead(b *testing.B) {
	data := attachmentstest.Screenshot(b, 1920, 1080)
	walls := make([]time.Duration, 0, b.N)
	defer cpuPerOp(b)()
	for b.Loop() {
		t0 := time.Now()
		if _, _, err := prepareImage(data, DefaultMaxSide, DefaultMaxPixels); err != nil {
			b.Fatal(err)
		}
		walls = append(walls, time.Since(t0))
	}
	slices.Sort(walls)
	b.ReportMetric(float64(walls[len(walls)/2].Microseconds())/1000, "overhead-ms")
}

// BenchmarkImageStages: each stage of the screenshot on its own, with the
// x/image and image/png ways they replaced as references (ref-…).
func BenchmarkImageStages(b *testing.B) {
	data := attachmentstest.Screenshot(b, 1920, 1080)
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	w, h := fit(1920, 1080, DefaultMaxSide)
	dst := scale(src, w, h, 1)
	stages := []struct {
		name string
		run  func()
	}{
		{"decode", func() { _, _, _ = image.Decode(bytes.NewReader(data)) }},
		{"scale", func() { scale(src, w, h, runtime.GOMAXPROCS(0)) }},
		{"scale-one-core", func() { scale(src, w, h, 1) }},
		{"ref-approxbilinear-one-core", func() {
			d := image.NewRGBA(image.Rect(0, 0, w, h))
			draw.ApproxBiLinear.Scale(d, d.Bounds(), src, src.Bounds(), draw.Src, nil)
		}},
		{"encode", func() { encodeOpaquePNG(dst, runtime.GOMAXPROCS(0)) }},
		{"encode-one-core", func() { encodeOpaquePNG(dst, 1) }},
		{"ref-image-png-bestspeed", func() {
			_ = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&bytes.Buffer{}, dst)
		}},
	}
	for _, s := range stages {
		b.Run(s.name, func(b *testing.B) {
			defer cpuPerOp(b)()
			for b.Loop() {
				s.run()
			}
		})
	}
}

// cpuPerOp reports the process's CPU time (user+system) per op.
func cpuPerOp(b *testing.B) func() {
	c0 := cpuNow()
	return func() { b.ReportMetric(float64((cpuNow()-c0).Microseconds())/1000/float64(b.N), "cpu-ms/op") }
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
