// Package attachmentstest makes real files for tests: a PNG screenshot, a
// CSV, a two-page PDF with text, a scanned PDF with no text layer, a PNG
// decompression bomb, an Ogg voice note's first bytes.
package attachmentstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"codeberg.org/go-pdf/fpdf"

	"github.com/marlowe-bot/marlowe/core"
)

// Screenshot is a w×h PNG drawn like a terminal: dark background, rows of
// light "text" blocks and a red error bar.
func Screenshot(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.RGBA{30, 30, 36, 255}
			row, col := y/24, x/12
			if y%24 > 4 && y%24 < 18 && x%12 < 9 && (row*7+col*13)%5 != 0 && col < 40+row%60 {
				c = color.RGBA{220, 220, 210, 255}
			}
			if y > h/2 && y < h/2+30 {
				c = color.RGBA{200, 40, 40, 255}
			}
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// CSV is a CSV export of n rows.
func CSV(n int) []byte {
	var b strings.Builder
	b.WriteString("order_id,customer,amount,status\n")
	for i := 1; i <= n; i++ {
		status := "paid"
		if i%17 == 0 {
			status = "FAILED"
		}
		b.WriteString(strings.Join([]string{itoa(1000 + i), "cust" + itoa(i%23), itoa(i * 7 % 500), status}, ",") + "\n")
	}
	return []byte(b.String())
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// PDF is a PDF with one page per text, written with a real PDF writer.
func PDF(t testing.TB, pages ...string) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", "")
	p.SetFont("Helvetica", "", 12)
	for _, text := range pages {
		p.AddPage()
		p.MultiCell(0, 6, text, "", "L", false)
	}
	var b bytes.Buffer
	if err := p.Output(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// ScannedPDF is a PDF whose pages are images only: no text layer.
func ScannedPDF(t testing.TB, pages int) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", "")
	scan := Screenshot(t, 300, 400)
	p.RegisterImageOptionsReader("scan", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(scan))
	for i := 0; i < pages; i++ {
		p.AddPage()
		p.ImageOptions("scan", 10, 10, 190, 0, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	}
	var b bytes.Buffer
	if err := p.Output(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// PNGBomb is a small PNG whose header declares w×h pixels: decoding it
// would allocate w×h×4 bytes. Its chunks are valid (CRCs right), so only
// a check of the dimensions stops it.
func PNGBomb(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		_ = binary.Write(&b, binary.BigEndian, c.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 0 // 8-bit greyscale
	chunk("IHDR", ihdr)
	// A zlib stream of zeros: compresses a huge image into a few bytes.
	chunk("IDAT", []byte{0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

// OggVoice is the start of an Ogg Opus voice note (what Telegram sends):
// enough for the type to be sniffed.
func OggVoice() []byte {
	b := []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00")
	b = append(b, []byte("\x00\x00\x00\x00\x01\x13OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00")...)
	return append(b, bytes.Repeat([]byte{0x55}, 2000)...)
}

// BlobSuite holds a core.BlobStore to its contract: content-addressed put
// (idempotent, hash checked), get, ErrBlobNotFound, delete.
func BlobSuite(t *testing.T, s core.BlobStore) {
	t.Helper()
	ctx := context.Background()
	data := []byte("an image's bytes")
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if err := s.PutBlob(ctx, hash, data); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := s.PutBlob(ctx, hash, data); err != nil {
		t.Fatalf("put again: %v", err)
	}
	if err := s.PutBlob(ctx, hash, []byte("other bytes")); err == nil {
		t.Error("put under a hash that is not the content's accepted")
	}
	got, err := s.GetBlob(ctx, hash)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %q %v", got, err)
	}
	if err := s.DeleteBlob(ctx, hash); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.GetBlob(ctx, hash); !errors.Is(err, core.ErrBlobNotFound) {
		t.Errorf("get after delete: %v, want ErrBlobNotFound", err)
	}
	if err := s.DeleteBlob(ctx, hash); err != nil {
		t.Errorf("delete of an absent blob: %v", err)
	}
}
