package attachments

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/image/draw"

	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
	"github.com/marlowe-bot/marlowe/core"
)

// scaleCases are sources of each kind prepareImage scales: an opaque
// RGBA (a PNG screenshot), a translucent NRGBA, a JPEG's YCbCr, a GIF's
// palette; sizes that do not divide evenly, big and small shrink ratios.
// Half a screenshot's size each way: the same ratios, a quarter of the
// pixels, since these run under the race detector.
func scaleCases(t *testing.T) []struct {
	name string
	src  image.Image
	w, h int
} {
	rng := rand.New(rand.NewPCG(1, 2))
	opaque := image.NewRGBA(image.Rect(0, 0, 960, 540))
	translucent := image.NewNRGBA(image.Rect(0, 0, 351, 1000))
	ycc := image.NewYCbCr(image.Rect(0, 0, 501, 389), image.YCbCrSubsampleRatio420)
	pal := image.NewPaletted(image.Rect(0, 0, 320, 240), nil)
	for i := range 256 {
		pal.Palette = append(pal.Palette, color.RGBA{uint8(i), uint8(255 - i), uint8(i * 7), 255})
	}
	for _, pix := range [][]byte{opaque.Pix, translucent.Pix, ycc.Y, ycc.Cb, ycc.Cr, pal.Pix} {
		for i := range pix {
			pix[i] = byte(rng.Uint32())
		}
	}
	for i := 3; i < len(opaque.Pix); i += 4 {
		opaque.Pix[i] = 255
	}
	// A sub-image: bounds not at the origin.
	sub := opaque.SubImage(image.Rect(50, 25, 850, 500))
	return []struct {
		name string
		src  image.Image
		w, h int
	}{
		{"opaque screenshot", opaque, 784, 441},
		{"opaque 3.7x", opaque, 259, 146},
		{"translucent tall", translucent, 274, 784},
		{"jpeg ycbcr", ycc, 200, 155},
		{"gif palette", pal, 150, 112},
		{"sub-image", sub, 500, 297},
		{"five rows", opaque, 784, 5},
		{"one row, past the radius cap", opaque, 784, 1},
		{"same size", translucent, 351, 1000},
	}
}

// Scaling in strips gives the very pixels of one pass, for every kind of
// source and sizes that do not divide evenly.
func TestScaleInStripsIsOnePass(t *testing.T) {
	for _, tc := range scaleCases(t) {
		want := scale(tc.src, tc.w, tc.h, 1)
		for _, strips := range []int{2, 3, 4, 7} {
			if got := scale(tc.src, tc.w, tc.h, strips); !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%s in %d strips: pixels differ from one pass", tc.name, strips)
			}
		}
	}
}

// The fixed-point scaler is x/image/draw's area-averaging BiLinear kernel
// (every source pixel counts, however large the shrink) to within one
// level per channel: it trades no legibility for its speed. Nearest
// neighbour or draw.ApproxBiLinear (which samples 2×2 source pixels per
// destination pixel and skips the rest when shrinking more than 2×) are
// far from it on the 3.7× case.
func TestScaleIsTheBiLinearKernel(t *testing.T) {
	for _, tc := range scaleCases(t) {
		if tc.src.Bounds().Dy() > maxRadius*tc.h || tc.src.Bounds().Dx() > maxRadius*tc.w {
			continue // the radius is capped there: not the kernel's
		}
		want := image.NewRGBA(image.Rect(0, 0, tc.w, tc.h))
		draw.BiLinear.Scale(want, want.Bounds(), tc.src, tc.src.Bounds(), draw.Src, nil)
		got := scale(tc.src, tc.w, tc.h, 2)
		worst, at := 0, 0
		for i := range got.Pix {
			if d := abs(int(got.Pix[i]) - int(want.Pix[i])); d > worst {
				worst, at = d, i
			}
		}
		if worst > 1 {
			t.Errorf("%s: channel %d differs from draw.BiLinear by %d levels (got %d, want %d)", tc.name, at, worst, got.Pix[at], want.Pix[at])
		}
	}
}

// isOpaque's fast path for RGBA finds one translucent pixel anywhere,
// odd widths and sub-images included.
func TestIsOpaque(t *testing.T) {
	for _, w := range []int{1, 2, 3, 17} {
		img := image.NewRGBA(image.Rect(0, 0, w, 5))
		for i := 3; i < len(img.Pix); i += 4 {
			img.Pix[i] = 255
		}
		if !isOpaque(img) {
			t.Fatalf("width %d: opaque image said translucent", w)
		}
		for x := range w {
			for y := range 5 {
				img.Pix[img.PixOffset(x, y)+3] = 254
				if isOpaque(img) {
					t.Errorf("width %d: alpha 254 at %d,%d not seen", w, x, y)
				}
				if sub := img.SubImage(image.Rect(0, 0, w, 5)); isOpaque(sub) {
					t.Errorf("width %d: sub-image: alpha 254 at %d,%d not seen", w, x, y)
				}
				img.Pix[img.PixOffset(x, y)+3] = 255
			}
		}
	}
}

// The bytes the model gets (and their hash in the journal) are the same
// on every run and whatever the number of cores.
func TestPrepareImageIsDeterministic(t *testing.T) {
	shot := attachmentstest.Screenshot(t, 1920, 1080)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var want *core.ImageSeen
	for _, procs := range []int{1, 2, 3, 4, 2} {
		runtime.GOMAXPROCS(procs)
		_, seen, err := prepareImage(shot, DefaultMaxSide, DefaultMaxPixels)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = seen
		} else if *seen != *want {
			t.Errorf("GOMAXPROCS=%d: %+v, want %+v", procs, seen, want)
		}
	}
}

// Re-encoding is what keeps a file's metadata from the provider and the
// blob store: a PNG text chunk and a JPEG's EXIF (where a phone writes
// the GPS position) are not in what the model gets. A pass-through of
// files that already fit would have to strip them itself.
func TestReencodingDropsMetadata(t *testing.T) {
	const secret = "GPSLatitude 48.8584 N, GPSLongitude 2.2945 E"
	shot := attachmentstest.Screenshot(t, 640, 400)
	// A tEXt chunk right after IHDR (8-byte signature, 25-byte IHDR).
	text := appendPNGChunk(nil, "tEXt", []byte("Comment\x00"+secret))
	withText := append(append(append([]byte(nil), shot[:33]...), text...), shot[33:]...)

	img, _ := png.Decode(bytes.NewReader(shot))
	var j bytes.Buffer
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	// An APP1 Exif segment right after SOI.
	exif := append([]byte("Exif\x00\x00"), secret...)
	app1 := append([]byte{0xff, 0xe1, byte((len(exif) + 2) >> 8), byte(len(exif) + 2)}, exif...)
	withExif := append(append(append([]byte(nil), j.Bytes()[:2]...), app1...), j.Bytes()[2:]...)

	for name, file := range map[string][]byte{"png tEXt": withText, "jpeg exif": withExif} {
		if !bytes.Contains(file, []byte(secret)) {
			t.Fatalf("%s: the test file lacks its metadata", name)
		}
		out, _, err := prepareImage(file, DefaultMaxSide, DefaultMaxPixels)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bytes.Contains(out, []byte(secret)) || bytes.Contains(out, []byte("Exif")) {
			t.Errorf("%s: the metadata reached what the model gets", name)
		}
	}
}

func appendPNGChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	c := crc32.NewIEEE()
	c.Write([]byte(typ))
	c.Write(data)
	b = append(append(b, typ...), data...)
	return binary.BigEndian.AppendUint32(b, c.Sum32())
}

// An absurd aspect ratio (25,000,000×1 passes the pixel bound) does not
// make the weight tables as big as the image: the radius is capped.
func TestScaleWeightsStaySmall(t *testing.T) {
	a := newAxis(DefaultMaxSide, 25_000_000)
	if n := len(a.padded) + len(a.w); n > DefaultMaxSide*4*(maxRadius+2) {
		t.Errorf("%d weights for one axis", n)
	}
	var sum int32
	for _, w := range a.w[a.off[700]:a.off[701]] {
		sum += w
	}
	if sum != 1<<weightBits {
		t.Errorf("weights sum to %d", sum)
	}
	// A wide paletted image, a few rows tall: converted rows are few.
	pal := image.NewPaletted(image.Rect(0, 0, 200_000, 40), color.Palette{color.White, color.Black})
	for i := range pal.Pix {
		pal.Pix[i] = uint8(i / 7 % 2)
	}
	got := scale(pal, DefaultMaxSide, 1, 2)
	if r := newRowReader(pal, 80); len(r.ring) > 3 {
		t.Errorf("ring of %d rows", len(r.ring))
	}
	if g := got.Pix[4*700]; g < 100 || g > 155 {
		t.Errorf("half black, half white averages to %d", g)
	}
}
