package engine

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

// Erasure of shared files. What the model saw of a file (extracted text,
// a transcript) lives in its read_attachments tool.completed, and an
// image's bytes in the blob store under the hash that record names. These
// hooks are called by the erasures (forget me, retention): a record being
// redacted loses its blobs first, and `forget me` follows a person's
// erased message to the record of its files, which carries none of the
// words they typed and would otherwise survive.

// dropFiles deletes the blobs named by c when c is a read_attachments
// record, before c is redacted (afterwards its payload, and so the
// hashes, are gone).
func (e *Engine) dropFiles(ctx context.Context, c core.Command) error {
	if e.cfg.Blobs == nil || c.Kind() != core.KindToolCompleted || c.Redacted() {
		return nil
	}
	p, err := core.Decode[*core.ToolCompleted](c)
	if err != nil || len(p.Attachments) == 0 {
		return nil
	}
	for _, s := range p.Attachments {
		if s.Image == nil {
			continue
		}
		if err := e.cfg.Blobs.DeleteBlob(ctx, s.Image.SHA256); err != nil {
			return fmt.Errorf("erase image %s of seq %d: %w", s.Image.SHA256, c.Seq(), err)
		}
	}
	return nil
}

// dropFilesAt is dropFiles for the command at seq in ch, read only when it
// may be a files record.
func (e *Engine) dropFilesAt(ctx context.Context, ch core.ChannelKey, seq uint64, kind core.Kind) error {
	if e.cfg.Blobs == nil || kind != core.KindToolCompleted {
		return nil
	}
	cmds, err := e.j.Read(ctx, ch, seq, 1)
	if err != nil {
		return fmt.Errorf("read %s seq %d: %w", ch, seq, err)
	}
	if len(cmds) != 1 || cmds[0].Seq() != seq {
		return nil
	}
	return e.dropFiles(ctx, cmds[0])
}

// filesOfErased follows one pass over a channel's journal: the
// read_attachments records (request and result) of the messages erased
// in it belong to the erasure too.
type filesOfErased struct {
	msgs map[string]bool // erased message.received ids
	reqs map[string]bool // their read_attachments tool.requested ids
}

func newFilesOfErased() *filesOfErased {
	return &filesOfErased{msgs: map[string]bool{}, reqs: map[string]bool{}}
}

// erased notes a command the pass redacted.
func (f *filesOfErased) erased(c core.Command) {
	if c.Kind() == core.KindMessageReceived {
		f.msgs[c.ID()] = true
	}
}

// belongs reports whether c records the files of an erased message. The
// journal is read in order, so the message comes before its record.
func (f *filesOfErased) belongs(c core.Command) bool {
	switch c.Kind() {
	case core.KindToolRequested:
		p, err := core.Decode[*core.ToolRequested](c)
		if err != nil {
			return false
		}
		for _, id := range p.ReadAttachments {
			if f.msgs[id] {
				f.reqs[c.ID()] = true
				return true
			}
		}
	case core.KindToolCompleted:
		return f.reqs[c.Cause()]
	}
	return false
}
