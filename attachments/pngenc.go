package attachments

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"image"
	"sync"
)

// pngBandRows is how many rows are filtered and compressed as one piece.
// It is fixed (not derived from the number of cores) so that the same
// image gives the same bytes, and so the same hash, on every machine.
const pngBandRows = 64

// encodeOpaquePNG writes an opaque RGBA image as an 8-bit RGB PNG (what
// image/png writes for it), on up to workers goroutines: the rows are cut
// into bands of pngBandRows, each band filtered (per row, the filter of
// None, Sub, Up and Paeth whose output has the smallest sum of absolute
// values, image/png's heuristic without Average) and deflated at
// BestSpeed as its own stream ended by a sync flush (the last band by the
// final block). Deflate streams so ended concatenate into one valid
// stream (pigz's way); the zlib checksum is the bands' Adler-32s
// combined. image/png decodes the result to the very pixels
// (TestEncodeOpaquePNGRoundTrips).
func encodeOpaquePNG(img *image.RGBA, workers int) []byte {
	return encodeRGBRows(img.Rect.Dx(), img.Rect.Dy(), func() func(int, []byte) {
		return func(y int, dst []byte) {
			i := img.PixOffset(img.Rect.Min.X, img.Rect.Min.Y+y)
			rgbFromRGBA(dst, img.Pix[i:i+img.Rect.Dx()*4])
		}
	}, workers)
}

// encodeScaledPNG is encodeOpaquePNG of what sc scales an opaque source
// to, without the scaled image ever being whole in memory: each band's
// rows are scaled as they are encoded (and the row above it once more).
func encodeScaledPNG(sc *scaler, w, h, workers int) []byte {
	return encodeRGBRows(w, h, func() func(int, []byte) {
		row, rgba := sc.rows(), make([]uint8, w*4)
		return func(y int, dst []byte) {
			row(y, rgba)
			rgbFromRGBA(dst, rgba)
		}
	}, workers)
}

// encodeRGBRows writes a w×h RGB PNG whose rows come from rows: each
// worker calls it once for a function that writes row y's RGB bytes (and
// one spare byte), asked for in increasing y.
func encodeRGBRows(w, h int, rows func() func(y int, dst []byte), workers int) []byte {
	bands := (h + pngBandRows - 1) / pngBandRows
	// A band's stream is in its worker's buffer until the writer below
	// has copied it (done, then copied): each worker reuses one buffer, so
	// the only garbage is none.
	type band struct {
		z            []byte
		adler        uint32
		n            int // filtered bytes
		done, copied chan struct{}
	}
	out := make([]band, bands)
	for i := range out {
		out[i].done, out[i].copied = make(chan struct{}), make(chan struct{})
	}
	workers = max(1, min(workers, maxStrips, bands))
	var wg sync.WaitGroup
	for wk := range workers {
		wg.Go(func() {
			rowLen := 1 + 3*w
			// One spare byte: rgbRow writes 4 bytes a pixel.
			cur := make([]byte, rowLen+1)
			prev := make([]byte, rowLen+1)
			best := make([]byte, rowLen)
			try := make([]byte, rowLen)
			var z bytes.Buffer
			zw, _ := flate.NewWriter(&z, flate.BestSpeed)
			rgbRow := rows()
			for bi := wk; bi < bands; bi += workers {
				b := &out[bi]
				z.Reset()
				zw.Reset(&z)
				y0, y1 := bi*pngBandRows, min(h, (bi+1)*pngBandRows)
				// The row above the band, for the Up and Paeth filters.
				clear(prev)
				if y0 > 0 {
					rgbRow(y0-1, prev[1:])
				}
				sum := adler32.New()
				for y := y0; y < y1; y++ {
					rgbRow(y, cur[1:])
					f := filterRow(best, try, cur[1:rowLen], prev[1:rowLen])
					_, _ = zw.Write(f) // to a bytes.Buffer: no error
					_, _ = sum.Write(f)
					b.n += len(f)
					prev, cur = cur, prev
				}
				if bi == bands-1 {
					_ = zw.Close()
				} else {
					_ = zw.Flush()
				}
				b.z, b.adler = z.Bytes(), sum.Sum32()
				close(b.done)
				<-b.copied
			}
		})
	}
	defer wg.Wait()

	// The file is written once: each band's stream is copied in as soon
	// as it is done (a noise image barely compresses: a second copy of it,
	// or a buffer per band, would count against the memory bound). Its
	// capacity is deflate's worst case (stored blocks: 5 bytes each 64 KiB,
	// and a flush marker a band), so it is not grown; a well-compressed
	// image is copied out of it at its size.
	raw := h * (1 + 3*w)
	bound := 8 + (12 + 13) + 12 + 2 + raw + 5*(raw/65535+1) + 5*bands + 4 + 12
	png := make([]byte, 0, bound)
	png = append(png, "\x89PNG\r\n\x1a\n"...)
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8 bits, truecolour, deflate, adaptive filters, not interlaced
	png = appendChunk(png, "IHDR", ihdr)
	lenAt := len(png)
	png = append(png, 0, 0, 0, 0, 'I', 'D', 'A', 'T')
	png = append(png, 0x78, 0x01) // zlib header: deflate, 32 KiB window, fastest
	adler := uint32(1)
	for i := range out {
		<-out[i].done
		png = append(png, out[i].z...)
		out[i].z = nil
		close(out[i].copied)
		adler = adler32Combine(adler, out[i].adler, out[i].n)
	}
	png = binary.BigEndian.AppendUint32(png, adler)
	binary.BigEndian.PutUint32(png[lenAt:], uint32(len(png)-lenAt-8))
	png = binary.BigEndian.AppendUint32(png, crc32.ChecksumIEEE(png[lenAt+4:]))
	png = appendChunk(png, "IEND", nil)
	if len(png) < cap(png)/2 {
		png = append([]byte(nil), png...)
	}
	return png
}

func appendChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// rgbFromRGBA writes src's pixels without their alpha (the image is
// opaque) to dst, which has room for one byte more.
func rgbFromRGBA(dst, src []byte) {
	dst = dst[:len(src)/4*3+1]
	for j, k := 0, 0; j+3 < len(src) && k+3 < len(dst); j, k = j+4, k+3 {
		binary.LittleEndian.PutUint32(dst[k:k+4], binary.LittleEndian.Uint32(src[j:j+4]))
	}
}

// filterRow returns cur (3 bytes a pixel) filtered for PNG, filter type
// first, in best (try is scratch): of None, Sub, Up and Paeth, the one
// whose bytes, read as signed, have the smallest sum of absolute values
// (a candidate stops as soon as it cannot win).
func filterRow(best, try, cur, prev []byte) []byte {
	const bpp = 3
	n := len(cur)
	best, try = best[:n+1], try[:n+1]
	cur, prev = cur[:n], prev[:n]

	// Up first: on screenshots it usually wins, and the others stop early.
	b := best[1 : n+1]
	best[0] = 2
	score := 0
	for i := range n {
		d := cur[i] - prev[i]
		b[i] = d
		score += absInt8(d)
	}
	keep := func(kind byte, s int) {
		if s < score {
			try[0], score = kind, s
			best, try = try, best
		}
	}
	// None
	s := 0
	for _, v := range cur {
		s += absInt8(v)
		if s >= score {
			break
		}
	}
	if s < score {
		try[0] = 0
		copy(try[1:], cur)
		keep(0, s)
	}
	// Sub
	t := try[1 : n+1]
	s = 0
	for i := range bpp {
		t[i] = cur[i]
		s += absInt8(cur[i])
	}
	for i := bpp; i < n && s < score; i++ {
		d := cur[i] - cur[i-bpp]
		t[i] = d
		s += absInt8(d)
	}
	keep(1, s)
	// Paeth
	t = try[1 : n+1]
	s = 0
	for i := range bpp {
		d := cur[i] - prev[i]
		t[i] = d
		s += absInt8(d)
	}
	for i := bpp; i < n && s < score; i++ {
		d := cur[i] - paeth(cur[i-bpp], prev[i], prev[i-bpp])
		t[i] = d
		s += absInt8(d)
	}
	keep(4, s)
	return best
}

func absInt8(v byte) int {
	x := int(int8(v))
	m := x >> 63
	return (x ^ m) - m
}

// paeth is the PNG Paeth predictor of a (left), b (above), c (above left).
func paeth(a, b, c uint8) uint8 {
	pa := int(b) - int(c)
	pb := int(a) - int(c)
	pc := pa + pb
	pa, pb, pc = abs(pa), abs(pb), abs(pc)
	if pa <= pb && pa <= pc {
		return a
	} else if pb <= pc {
		return b
	}
	return c
}

// adler32Combine is the Adler-32 of A‖B from those of A and B and B's
// length (zlib's adler32_combine).
func adler32Combine(a, b uint32, lenB int) uint32 {
	const base = 65521
	rem := uint32(lenB % base)
	s1 := a & 0xffff
	s2 := rem * s1 % base
	s1 += (b & 0xffff) + base - 1
	s2 += (a >> 16) + (b >> 16) + base - rem
	if s1 >= base {
		s1 -= base
	}
	if s1 >= base {
		s1 -= base
	}
	if s2 >= 2*base {
		s2 -= 2 * base
	}
	if s2 >= base {
		s2 -= base
	}
	return s1 | s2<<16
}
