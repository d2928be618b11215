package slack

import (
	"bytes"
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

// UploadFile implements core.FileUploader: Slack's external upload
// (files.getUploadURLExternal, the bytes to the upload URL,
// files.completeUploadExternal sharing it into the conversation, in the
// thread when the scope has one). A file is a message: the upload waits
// in the channel's message queue (PriorityHigh, one call of the channel's
// budget), and a 429 on any step is waited out (Retry-After) and that
// step sent again; the steps already done are not repeated.
func (a *Adapter) UploadFile(ctx context.Context, scope core.Scope, f core.File) error {
	f = defangFile(f)
	if err := checkScope(scope); err != nil {
		return err
	}
	if len(f.Content) == 0 {
		return fmt.Errorf("slack upload %s: empty file", f.Name)
	}
	var (
		u        *slack.GetUploadURLExternalResponse
		uploaded bool
	)
	err := a.pacer.send(ctx, "files.completeUploadExternal", scope.Channel, core.PriorityHigh, "", func(ctx context.Context) error {
		if u == nil {
			got, err := a.api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: f.Name, FileSize: len(f.Content)})
			if err != nil {
				return fmt.Errorf("files.getUploadURLExternal: %w", err)
			}
			u = got
		}
		if !uploaded {
			if err := a.api.UploadToURL(ctx, slack.UploadToURLParameters{UploadURL: u.UploadURL, Reader: bytes.NewReader(f.Content), Filename: f.Name}); err != nil {
				return fmt.Errorf("upload to URL: %w", err)
			}
			uploaded = true
		}
		c, err := a.api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{
			Files:   []slack.FileSummary{{ID: u.FileID, Title: f.Title}},
			Channel: scope.Channel, ThreadTimestamp: scope.Thread,
		})
		if err != nil {
			return fmt.Errorf("files.completeUploadExternal: %w", err)
		}
		if len(c.Files) != 1 {
			return fmt.Errorf("files.completeUploadExternal: %d files shared, want 1", len(c.Files))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("slack upload %s to %s: %w", f.Name, scope.Channel, err)
	}
	return nil
}

var _ core.FileUploader = (*Adapter)(nil)
