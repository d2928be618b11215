package attachments

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decoders for image.DecodeConfig and image.Decode
	"image/jpeg"
	"image/png"
	"runtime"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/webp"

	"github.com/marlowe-bot/marlowe/core"
)

// errBomb is an image whose declared dimensions are past the pixel bound.
var errBomb = errors.New("image dimensions are too large to decode")

// prepareImage checks the image's dimensions from its header alone, then
// decodes it, scales it so its long side is at most maxSide, and
// re-encodes it: PNG for a PNG or GIF or an image with transparency (an
// opaque one with encodeOpaquePNG, on every core), JPEG 85 otherwise. It
// returns the bytes and what was seen; the same input gives the same
// bytes on every run and machine.
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
	// One scan for transparency serves the scale and the encoder.
	opaque := isOpaque(src)
	scaled := w != cfg.Width || h != cfg.Height
	var out []byte
	typ := "image/png"
	switch {
	case (format == "png" || format == "gif") && opaque && scaled:
		// Screenshots (PNG) keep sharp text as PNG; the scaled image is
		// encoded as it is made, never whole in memory.
		out = encodeScaledPNG(newScaler(src, w, h, true), w, h, runtime.GOMAXPROCS(0))
	case (format == "png" || format == "gif") && opaque && isRGBA(src):
		out = encodeOpaquePNG(src.(*image.RGBA), runtime.GOMAXPROCS(0))
	default:
		dst := src
		if scaled {
			dst = scaleKnown(src, w, h, runtime.GOMAXPROCS(0), opaque)
		}
		var buf bytes.Buffer
		if format == "png" || format == "gif" || !opaque {
			err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, dst)
		} else {
			typ = "image/jpeg"
			err = jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 85})
		}
		out = buf.Bytes()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("encode image: %w", err)
	}
	sum := sha256.Sum256(out)
	return out, &core.ImageSeen{
		SHA256: hex.EncodeToString(sum[:]), Type: typ, Width: w, Height: h,
		OrigWidth: cfg.Width, OrigHeight: cfg.Height,
	}, nil
}

func isRGBA(img image.Image) bool {
	_, ok := img.(*image.RGBA)
	return ok
}

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
