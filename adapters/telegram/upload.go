package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.FileUploader = (*Adapter)(nil)

// UploadFile implements core.FileUploader: sendDocument (multipart) into
// the scope's chat (its forum topic, replying to scope.Thread when set).
func (a *Adapter) UploadFile(ctx context.Context, scope core.Scope, f core.File) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	chat, topic, err := parseChannel(scope.Channel)
	if err != nil {
		return err
	}
	p := params("chat_id", itoa(chat), "caption", f.Title)
	if topic > 1 {
		p["message_thread_id"] = itoa(topic)
	}
	if scope.Thread != "" {
		if _, err := strconv.ParseInt(scope.Thread, 10, 64); err != nil {
			return fmt.Errorf("telegram: reply target %q is not a message id", scope.Thread)
		}
		p["reply_parameters"] = `{"message_id":` + scope.Thread + `,"allow_sending_without_reply":true}`
	}
	// A document is a message: it takes from the chat's (and the group's)
	// message budget, and a 429's retry_after is waited out in the queue
	// like a sendMessage's, rather than failing the upload.
	return a.pacer.do(ctx, "sendDocument", chat, core.PriorityHigh, "", func(ctx context.Context) error {
		bot := *a.bot // a shallow copy per call: only Client differs
		bot.Client = ctxClient{ctx: ctx, c: a.httpClient}
		resp, err := bot.UploadFiles("sendDocument", p, []tgbotapi.RequestFile{{Name: "document", Data: tgbotapi.FileBytes{Name: f.Name, Bytes: f.Content}}})
		if err != nil {
			var te *tgbotapi.Error
			if errors.As(err, &te) && te.Code == 0 && resp != nil {
				te.Code = resp.ErrorCode // UploadFiles leaves Telegram's code (a 429's) out of its error
			}
			return a.callErr("sendDocument", err)
		}
		return nil
	})
}
