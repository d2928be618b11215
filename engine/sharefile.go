package engine

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.FileSharer = (*toolSurface)(nil)

// ShareFile implements core.FileSharer for a tool (share_file): the file
// goes into the run's own thread as a keyed post. message.posted records
// it, so a resumed run finds it done; message.attempted is journaled just
// before the upload, so one a crash interrupted is in doubt and not made
// again (uploads cannot be looked up on the platforms by key).
func (t *toolSurface) ShareFile(ctx context.Context, f core.File) (core.MessageRef, error) {
	up, ok := t.Surface.(core.FileUploader)
	if !ok {
		return core.MessageRef{}, core.ErrNoFileUpload
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.d.rs
	t.next++
	out := core.Outbound{Key: core.EffectID(rs.Scope.Key(), t.cs.reqSeq, t.next), Scope: rs.Scope,
		Text: "file " + f.Name, Priority: core.PriorityHigh}
	v, err := t.e.channel(ctx, rs.Scope.Key())
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("share %s: %w", f.Name, err)
	}
	rec := postRecord{run: rs.ID, cause: t.cs.reqID, role: core.RoleMessage, keySeq: t.cs.reqSeq}
	att := postAttempts{e: t.e, v: v, scope: rs.Scope, rec: rec}
	rec.send = func(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
		if att.Made(ctx, out.Key) {
			return core.MessageRef{}, core.ErrShareInDoubt
		}
		if err := att.Record(ctx, out.Key); err != nil {
			return core.MessageRef{}, err
		}
		if err := up.UploadFile(ctx, out.Scope, f); err != nil {
			return core.MessageRef{}, err
		}
		// Uploads return no message id on every platform: the effect's
		// key names it.
		return core.MessageRef{Scope: out.Scope, ID: "file:" + out.Key, At: t.e.now()}, nil
	}
	return t.e.post(ctx, t.Surface, rs, out, rec)
}
