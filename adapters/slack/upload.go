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
// thread when the scope has one).
func (a *Adapter) UploadFile(ctx context.Context, scope core.Scope, f core.File) error {
	f = defangFile(f)
	if err := checkScope(scope); err != nil {
		return err
	}
	if len(f.Content) == 0 {
		return fmt.Errorf("slack upload %s: empty file", f.Name)
	}
	_, err := a.api.UploadFileContext(ctx, slack.UploadFileParameters{
		Reader: bytes.NewReader(f.Content), FileSize: len(f.Content), Filename: f.Name, Title: f.Title,
		Channel: scope.Channel, ThreadTimestamp: scope.Thread,
	})
	if err != nil {
		return fmt.Errorf("slack upload %s to %s: %w", f.Name, scope.Channel, err)
	}
	return nil
}

var _ core.FileUploader = (*Adapter)(nil)
