package attachments

import (
	"bytes"
	"hash/adler32"
	"image"
	"image/png"
	"math/rand/v2"
	"testing"

	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
)

// The parallel PNG encoder's output is a PNG that image/png decodes to
// the very pixels, whatever the number of workers, and the bytes are the
// same for every number of workers (the blob hash must not depend on the
// machine's cores).
func TestEncodeOpaquePNGRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	noise := image.NewRGBA(image.Rect(0, 0, 333, 201))
	for i := range noise.Pix {
		noise.Pix[i] = byte(rng.Uint32())
		if i%4 == 3 {
			noise.Pix[i] = 255
		}
	}
	shot, err := png.Decode(bytes.NewReader(attachmentstest.Screenshot(t, 1920, 1080)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		img  *image.RGBA
	}{
		{"noise, rows not a multiple of the band", noise},
		{"screenshot", shot.(*image.RGBA)},
		{"sub-image off the origin", noise.SubImage(image.Rect(7, 65, 300, 190)).(*image.RGBA)},
		{"one pixel", noise.SubImage(image.Rect(0, 0, 1, 1)).(*image.RGBA)},
		{"one band exactly", noise.SubImage(image.Rect(0, 0, 50, pngBandRows)).(*image.RGBA)},
	}
	for _, tc := range tests {
		want := encodeOpaquePNG(tc.img, 1)
		for _, workers := range []int{2, 3, 4} {
			if got := encodeOpaquePNG(tc.img, workers); !bytes.Equal(got, want) {
				t.Errorf("%s: %d workers give other bytes than one", tc.name, workers)
			}
		}
		dec, err := png.Decode(bytes.NewReader(want))
		if err != nil {
			t.Fatalf("%s: image/png cannot decode it: %v", tc.name, err)
		}
		b := tc.img.Rect
		if dec.Bounds() != image.Rect(0, 0, b.Dx(), b.Dy()) {
			t.Fatalf("%s: decoded bounds %v, want %dx%d", tc.name, dec.Bounds(), b.Dx(), b.Dy())
		}
		for y := range b.Dy() {
			for x := range b.Dx() {
				if g, w := dec.At(x, y), tc.img.At(b.Min.X+x, b.Min.Y+y); g != w {
					t.Fatalf("%s: pixel %d,%d is %v, want %v", tc.name, x, y, g, w)
				}
			}
		}
	}
}

func TestAdler32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range [][2]int{{0, 0}, {1, 0}, {0, 7}, {5552, 5553}, {70000, 200000}, {65521, 65521 * 2}} {
		a, b := make([]byte, n[0]), make([]byte, n[1])
		for i := range a {
			a[i] = 0xff - byte(rng.IntN(3))
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want := adler32.Checksum(append(append([]byte(nil), a...), b...))
		if got := adler32Combine(adler32.Checksum(a), adler32.Checksum(b), len(b)); got != want {
			t.Errorf("%d+%d bytes: combined %08x, want %08x", n[0], n[1], got, want)
		}
	}
}

// Scaling while encoding gives a PNG of the very pixels scale gives, the
// same bytes for any number of workers (bands start mid-way through the
// scaler's rows, each with the row above it scaled again).
func TestEncodeScaledPNGIsScaleThenEncode(t *testing.T) {
	for _, tc := range scaleCases(t) {
		if !isOpaque(tc.src) {
			continue
		}
		want := scale(tc.src, tc.w, tc.h, 1)
		enc := encodeScaledPNG(newScaler(tc.src, tc.w, tc.h, true), tc.w, tc.h, 1)
		for _, workers := range []int{2, 3} {
			if got := encodeScaledPNG(newScaler(tc.src, tc.w, tc.h, true), tc.w, tc.h, workers); !bytes.Equal(got, enc) {
				t.Errorf("%s: %d workers give other bytes than one", tc.name, workers)
			}
		}
		if !bytes.Equal(enc, encodeOpaquePNG(want, 1)) {
			t.Errorf("%s: scaling while encoding differs from encoding the scaled image", tc.name)
		}
	}
}
