package attachments

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // decoders for image.DecodeConfig and image.Decode
	"image/jpeg"
	"image/png"
	"runtime"
	"sync"

	_ "golang.org/x/image/bmp"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"

	"github.com/marlowe-bot/marlowe/core"
)

// errBomb is an image whose declared dimensions are past the pixel bound.
var errBomb = errors.New("image dimensions are too large to decode")

// prepareImage checks the image's dimensions from its header alone, then
// decodes it, scales it so its long side is at most maxSide, and
// re-encodes it: PNG when it has transparency or few enough pixels to
// stay small, JPEG otherwise. It returns the bytes and what was seen.
func prepareImage(b []byte, maxSide, maxPixels int) ([]byte, *core.ImageSeen, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, nil, fmt.Errorf("read image header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, nil, fmt.Errorf("image has no pixels (%dx%d)", cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return nil, nil, fmt.Errorf("%w: %dx%d is past %d pixels", errBomb, cfg.Width, cfg.Height, maxPixels)
	}
	src, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, nil, fmt.Errorf("decode %s image: %w", format, err)
	}
	w, h := fit(cfg.Width, cfg.Height, maxSide)
	var dst image.Image = src
	if w != cfg.Width || h != cfg.Height {
		dst = scale(src, w, h, runtime.GOMAXPROCS(0))
	}
	var out bytes.Buffer
	typ := "image/jpeg"
	if format == "png" || format == "gif" || hasAlpha(dst) {
		// Screenshots (PNG) keep sharp text as PNG.
		typ = "image/png"
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&out, dst)
	} else {
		err = jpeg.Encode(&out, opaque(dst), &jpeg.Options{Quality: 85})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("encode image: %w", err)
	}
	sum := sha256.Sum256(out.Bytes())
	return out.Bytes(), &core.ImageSeen{
		SHA256: hex.EncodeToString(sum[:]), Type: typ, Width: w, Height: h,
		OrigWidth: cfg.Width, OrigHeight: cfg.Height,
	}, nil
}

// scale draws src onto a new w×h RGBA, bilinearly, in up to strips
// horizontal strips at once: each strip is the same mapping of the whole
// source onto the whole destination, clipped to its rows, so the result
// does not depend on strips. Src, not Over: the destination is new
// (transparent), where both give the same pixels, and Src skips Over's
// scan of the source for opacity.
func scale(src image.Image, w, h, strips int) *image.RGBA {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	strips = max(1, min(strips, maxStrips, h))
	var wg sync.WaitGroup
	for i := range strips {
		rows := image.Rect(0, h*i/strips, w, h*(i+1)/strips)
		wg.Go(func() {
			draw.ApproxBiLinear.Scale(dst.SubImage(rows).(*image.RGBA), dst.Bounds(), src, src.Bounds(), draw.Src, nil)
		})
	}
	wg.Wait()
	return dst
}

// maxStrips bounds the goroutines one image is scaled with.
const maxStrips = 4

// fit scales w×h so that its long side is at most max, keeping the ratio.
func fit(w, h, max int) (int, int) {
	if w <= max && h <= max {
		return w, h
	}
	if w >= h {
		return max, maxInt(1, h*max/w)
	}
	return maxInt(1, w*max/h), max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func hasAlpha(img image.Image) bool {
	switch m := img.(type) {
	case *image.RGBA:
		return !m.Opaque()
	case *image.NRGBA:
		return !m.Opaque()
	case *image.Paletted:
		return !m.Opaque()
	}
	return false
}

// opaque flattens an image onto white for JPEG.
func opaque(img image.Image) image.Image {
	if o, ok := img.(interface{ Opaque() bool }); ok && o.Opaque() {
		return img
	}
	b := img.Bounds()
	dst := image.NewRGBA(b)
	draw.Draw(dst, b, image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(dst, b, img, b.Min, draw.Over)
	return dst
}
