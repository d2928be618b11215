package attachments

import (
	"bytes"
	"image"
	"math/rand/v2"
	"testing"

	"golang.org/x/image/draw"
)

// Scaling in strips gives the very pixels of one bilinear Over pass onto
// a new image (what prepareImage did before), for opaque and translucent
// sources and for sizes that do not divide evenly.
func TestScaleInStripsIsOnePass(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	opaque := image.NewRGBA(image.Rect(0, 0, 1920, 1080))
	translucent := image.NewNRGBA(image.Rect(0, 0, 701, 1999))
	for _, pix := range [][]byte{opaque.Pix, translucent.Pix} {
		for i := range pix {
			pix[i] = byte(rng.Uint32())
		}
	}
	for i := 3; i < len(opaque.Pix); i += 4 {
		opaque.Pix[i] = 255
	}
	tests := []struct {
		name string
		src  image.Image
		w, h int
	}{
		{"opaque screenshot", opaque, 1568, 882},
		{"translucent tall", translucent, 548, 1567},
		{"one row", opaque, 1568, 1},
	}
	for _, tc := range tests {
		want := image.NewRGBA(image.Rect(0, 0, tc.w, tc.h))
		draw.ApproxBiLinear.Scale(want, want.Bounds(), tc.src, tc.src.Bounds(), draw.Over, nil)
		for _, strips := range []int{1, 2, 3, 4, 7} {
			if got := scale(tc.src, tc.w, tc.h, strips); !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%s in %d strips: pixels differ from one pass", tc.name, strips)
			}
		}
	}
}
