package attachments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/marlowe-bot/marlowe/core"
)

// DirBlobs is the embedded install's blob store: one file per blob under
// Dir (the data directory's blobs/), named by its sha256.
type DirBlobs struct{ Dir string }

var _ core.BlobStore = DirBlobs{}

func (d DirBlobs) path(hash string) (string, error) {
	if b, err := hex.DecodeString(hash); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("blob %q: not a sha256 in hex", hash)
	}
	return filepath.Join(d.Dir, hash[:2], hash), nil
}

// PutBlob stores data under hash, checking that it is data's hash; a blob
// already there is left as it is (content-addressed).
func (d DirBlobs) PutBlob(_ context.Context, hash string, data []byte) error {
	p, err := d.path(hash)
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hash {
		return fmt.Errorf("blob %s: content does not match its hash", hash)
	}
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("blob store: write %s: %w", hash, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("blob store: %w", err)
	}
	return nil
}

// GetBlob reads the blob under hash.
func (d DirBlobs) GetBlob(_ context.Context, hash string) ([]byte, error) {
	p, err := d.path(hash)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, core.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return b, nil
}

// DeleteBlob removes the blob under hash (absent is not an error).
func (d DirBlobs) DeleteBlob(_ context.Context, hash string) error {
	p, err := d.path(hash)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob store: %w", err)
	}
	return nil
}
