package attachments

import (
	"encoding/binary"
	"image"
	"sync"

	"golang.org/x/image/draw"
)

// maxRadius bounds the filter's radius, in source pixels.
const maxRadius = 256

// weightBits is the fixed-point precision of one axis's filter weights:
// each destination pixel's weights sum to exactly 1<<weightBits.
const weightBits = 20

// axis is a triangle (bilinear) filter along one axis, widened by the
// shrink ratio so that every source pixel contributes (area-averaging,
// like golang.org/x/image/draw.BiLinear), in integers: destination i
// reads source indices lo[i], lo[i]+1, … with weights w[off[i]:off[i+1]].
type axis struct {
	lo, off []int
	w       []int32
	maxTaps int
	// padded: destination i's weights at [i·maxTaps, (i+1)·maxTaps), zeros
	// after its own, for a loop of fixed length.
	padded []int32
}

// newAxis computes the weights of dn destination pixels from sn source
// pixels, in integer arithmetic only, so that the weights (and so the
// scaled pixels and their hash) are the same on every machine.
//
// The centre of destination i is at source coordinate
// c = ((2i+1)·sn − dn) / (2dn); the filter's radius is r = R/dn with
// R = max(sn, dn) (the shrink ratio, or 1). Source j weighs 1 − |j−c|/r,
// which is (2R − |2j·dn − (2i+1)·sn + dn|) / 2R: the numerator is used as
// the raw weight. Source indices outside [0, sn) are dropped and the rest
// renormalised, as x/image/draw's kernels do.
func newAxis(dn, sn int) axis {
	// The radius is capped at maxRadius source pixels, so the weight
	// tables (dn × 2·maxRadius at most) stay small for an absurd aspect
	// ratio (a 25,000,000×1 image passes the pixel bound): past a shrink
	// of maxRadius the filter averages the middle of each pixel's span.
	R := min(max(sn, dn), maxRadius*dn)
	a := axis{lo: make([]int, dn), off: make([]int, dn+1)}
	raw := make([]int, 0, 8)
	for i := range dn {
		base := (2*i+1)*sn - dn // 2dn·c
		first := max(0, (base-2*R)/(2*dn)-1)
		raw, a.lo[i] = raw[:0], -1
		total := 0
		for j := first; j < sn; j++ {
			d := 2*j*dn - base
			if d >= 2*R {
				break
			}
			wt := 2*R - abs(d)
			if wt <= 0 {
				continue
			}
			if a.lo[i] < 0 {
				a.lo[i] = j
			}
			// A gap cannot happen: weights are positive on one interval.
			raw = append(raw, wt)
			total += wt
		}
		sum, big := 0, 0
		for k, wt := range raw {
			fixed := wt << weightBits / total
			a.w = append(a.w, int32(fixed))
			sum += fixed
			if wt > raw[big] {
				big = k
			}
		}
		a.w[a.off[i]+big] += int32(1<<weightBits - sum)
		a.off[i+1] = len(a.w)
		a.maxTaps = max(a.maxTaps, len(raw))
	}
	a.padded = make([]int32, dn*a.maxTaps)
	for i := range dn {
		copy(a.padded[i*a.maxTaps:], a.w[a.off[i]:a.off[i+1]])
	}
	return a
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// scale resizes src to a new w×h RGBA with an area-averaging triangle
// filter (within one level per channel of x/image/draw.BiLinear), in up
// to strips horizontal strips at once. Each destination row is computed
// from the source alone, the same way in any strip, so the result does
// not depend on strips (TestScaleInStripsIsOnePass).
func scale(src image.Image, w, h, strips int) *image.RGBA {
	return scaleKnown(src, w, h, strips, isOpaque(src))
}

// scaleKnown is scale for a source known to be opaque, or not.
func scaleKnown(src image.Image, w, h, strips int, opaque bool) *image.RGBA {
	sc := newScaler(src, w, h, opaque)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	strips = max(1, min(strips, maxStrips, h))
	var wg sync.WaitGroup
	for i := range strips {
		wg.Go(func() {
			row := sc.rows()
			for y := h * i / strips; y < h*(i+1)/strips; y++ {
				row(y, dst.Pix[y*dst.Stride:y*dst.Stride+w*4])
			}
		})
	}
	wg.Wait()
	return dst
}

// scaler maps src onto a w×h destination, one destination row at a time.
type scaler struct {
	src    image.Image
	xs, ys axis
	opaque bool
}

func newScaler(src image.Image, w, h int, opaque bool) *scaler {
	b := src.Bounds()
	return &scaler{src: src, xs: newAxis(w, b.Dx()), ys: newAxis(h, b.Dy()), opaque: opaque}
}

// rows returns a function writing destination row y as RGBA to out; it
// keeps scratch state, so each goroutine takes its own, and asks for rows
// in increasing order.
func (s *scaler) rows() func(y int, out []uint8) {
	st := &rowState{rows: newRowReader(s.src, s.ys.maxTaps),
		// Room past the last pixel for the horizontal pass's zero-weight taps.
		acc: make([]int32, (s.src.Bounds().Dx()+s.xs.maxTaps)*4)}
	return func(y int, out []uint8) { s.row(st, y, out) }
}

type rowState struct {
	rows *rowReader
	acc  []int32
}

// maxStrips bounds the goroutines one image is scaled or encoded with.
const maxStrips = 4

// isOpaque is whether every pixel of img is fully opaque; an *image.RGBA
// (what a PNG screenshot decodes to) is read 8 bytes at a time.
func isOpaque(img image.Image) bool {
	if m, ok := img.(*image.RGBA); ok {
		const alphas = 0xff000000ff000000
		for y := m.Rect.Min.Y; y < m.Rect.Max.Y; y++ {
			i := m.PixOffset(m.Rect.Min.X, y)
			row := m.Pix[i : i+m.Rect.Dx()*4]
			for len(row) >= 8 {
				if binary.LittleEndian.Uint64(row)&alphas != alphas {
					return false
				}
				row = row[8:]
			}
			if len(row) == 4 && row[3] != 0xff {
				return false
			}
		}
		return true
	}
	o, ok := img.(interface{ Opaque() bool })
	return ok && o.Opaque()
}

// row writes destination row y: first the vertical weighted sum of its
// source rows (at full source width, 20 fractional bits), then the
// horizontal one of that (40 fractional bits), rounded. With weights
// summing to exactly 1<<20 on each axis and none negative, a channel's
// sum is at most 255<<40 (int64; the vertical one, 255<<20, fits int32),
// so no clamp is needed and a premultiplied colour stays at most its
// alpha.
func (s *scaler) row(st *rowState, y int, out []uint8) {
	xs, ys, opaque, rows, acc := &s.xs, &s.ys, s.opaque, st.rows, st.acc
	sw, sh, taps := s.src.Bounds().Dx()*4, s.src.Bounds().Dy(), xs.maxTaps
	const half = 1 << (2*weightBits - 1)
	{
		lo := ys.lo[y]
		if vt := ys.maxTaps; opaque && vt == 3 {
			// The common case, unrolled: one pass over the three rows
			// (a zero-weight pad row past the last is read as the last).
			ws := ys.padded[y*3 : y*3+3 : y*3+3]
			w0, w1, w2 := ws[0], ws[1], ws[2]
			r0, r1, r2 := rows.row(lo)[:sw], rows.row(min(lo+1, sh-1))[:sw], rows.row(min(lo+2, sh-1))[:sw]
			acc := acc[:sw]
			for x := 0; x+3 < len(acc) && x+3 < len(r0) && x+3 < len(r1) && x+3 < len(r2); x += 4 {
				a, p0, p1, p2 := acc[x:x+3:x+3], r0[x:x+3:x+3], r1[x:x+3:x+3], r2[x:x+3:x+3]
				a[0] = w0*int32(p0[0]) + w1*int32(p1[0]) + w2*int32(p2[0])
				a[1] = w0*int32(p0[1]) + w1*int32(p1[1]) + w2*int32(p2[1])
				a[2] = w0*int32(p0[2]) + w1*int32(p1[2]) + w2*int32(p2[2])
			}
		} else {
			for k, wt := range ys.w[ys.off[y]:ys.off[y+1]] {
				row := rows.row(lo + k)[:sw]
				acc := acc[:sw]
				switch {
				case k == 0:
					for x, p := range row {
						acc[x] = wt * int32(p)
					}
				case opaque: // alpha is not read
					for x := 0; x+3 < len(row) && x+3 < len(acc); x += 4 {
						a, p := acc[x:x+3:x+3], row[x:x+3:x+3]
						a[0] += wt * int32(p[0])
						a[1] += wt * int32(p[1])
						a[2] += wt * int32(p[2])
					}
				default:
					for x := 0; x+3 < len(row) && x+3 < len(acc); x += 4 {
						a, p := acc[x:x+4:x+4], row[x:x+4:x+4]
						a[0] += wt * int32(p[0])
						a[1] += wt * int32(p[1])
						a[2] += wt * int32(p[2])
						a[3] += wt * int32(p[3])
					}
				}
			}
		}
		if opaque && taps == 3 {
			// The common case (shrinks up to 2×), unrolled.
			for i := range len(out) / 4 {
				ws := xs.padded[i*3 : i*3+3 : i*3+3]
				in := acc[xs.lo[i]*4 : xs.lo[i]*4+12 : xs.lo[i]*4+12]
				w0, w1, w2 := int64(ws[0]), int64(ws[1]), int64(ws[2])
				o := out[i*4 : i*4+4 : i*4+4]
				o[0] = uint8((w0*int64(in[0]) + w1*int64(in[4]) + w2*int64(in[8]) + half) >> (2 * weightBits))
				o[1] = uint8((w0*int64(in[1]) + w1*int64(in[5]) + w2*int64(in[9]) + half) >> (2 * weightBits))
				o[2] = uint8((w0*int64(in[2]) + w1*int64(in[6]) + w2*int64(in[10]) + half) >> (2 * weightBits))
				o[3] = 0xff
			}
			return
		}
		for i := range len(out) / 4 {
			ws := xs.padded[i*taps : i*taps+taps]
			in := acc[xs.lo[i]*4 : xs.lo[i]*4+taps*4]
			o := out[i*4 : i*4+4 : i*4+4]
			var r, g, b, a int64
			for k, wt := range ws {
				p := in[k*4 : k*4+4 : k*4+4]
				w := int64(wt)
				r += w * int64(p[0])
				g += w * int64(p[1])
				b += w * int64(p[2])
				a += w * int64(p[3])
			}
			o[0] = uint8((r + half) >> (2 * weightBits))
			o[1] = uint8((g + half) >> (2 * weightBits))
			o[2] = uint8((b + half) >> (2 * weightBits))
			if opaque {
				o[3] = 0xff
			} else {
				o[3] = uint8((a + half) >> (2 * weightBits))
			}
		}
	}
}

// rowReader hands out source rows as premultiplied RGBA bytes: an
// *image.RGBA's own rows, or, for any other image, rows converted on
// demand into a ring of at most three (a row handed out stays valid until
// three others have been asked for).
type rowReader struct {
	rgba  *image.RGBA
	src   image.Image
	ring  []*image.RGBA
	tag   []int
	width int
}

func newRowReader(src image.Image, taps int) *rowReader {
	if m, ok := src.(*image.RGBA); ok {
		return &rowReader{rgba: m}
	}
	// Three rows: the unrolled three-tap path holds three at once; wider
	// filters read their rows one at a time, so the ring never holds many
	// rows of a very wide image.
	taps = min(taps, 3)
	r := &rowReader{src: src, width: src.Bounds().Dx(), ring: make([]*image.RGBA, taps), tag: make([]int, taps)}
	for i := range r.ring {
		r.ring[i] = image.NewRGBA(image.Rect(0, 0, r.width, 1))
		r.tag[i] = -1
	}
	return r
}

func (r *rowReader) row(y int) []uint8 {
	if r.rgba != nil {
		i := r.rgba.PixOffset(r.rgba.Rect.Min.X, r.rgba.Rect.Min.Y+y)
		return r.rgba.Pix[i : i+r.rgba.Rect.Dx()*4]
	}
	slot := y % len(r.ring)
	if r.tag[slot] != y {
		b := r.src.Bounds()
		draw.Draw(r.ring[slot], r.ring[slot].Rect, r.src, image.Pt(b.Min.X, b.Min.Y+y), draw.Src)
		r.tag[slot] = y
	}
	return r.ring[slot].Pix
}
