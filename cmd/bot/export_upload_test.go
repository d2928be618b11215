package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// `export my data` in a Telegram DM, through `bot serve` and the Bot API
// fake: the JSON is uploaded there with sendDocument (multipart, as the
// Bot API takes files), holds Alice's kept messages and none of Bob's.
func TestServeTelegramExportUpload(t *testing.T) {
	tg := telegramfake.New(telegramfake.Config{MaxPollWait: time.Second})
	t.Cleanup(tg.Close)
	model := llmtest.NewOpenAIServer(t)
	logs, _ := serveWith(t, env(map[string]string{
		"MARLOWE_DATA_DIR":         t.TempDir(),
		"MARLOWE_HTTP_ADDR":        "127.0.0.1:0",
		"TELEGRAM_BOT_TOKEN":       tg.Config().Token,
		"MARLOWE_TELEGRAM_API_URL": tg.URL(),
		"MARLOWE_MODEL_PROVIDER":   "openai",
		"MARLOWE_MODEL":            "fake-model",
		"MARLOWE_MODEL_BASE_URL":   model.URL,
	}))
	aliceDM := telegramfake.Chat{ID: tgAlice.ID, Type: "private"}
	model.Enqueue(llmtest.Text("Noted about the walrus."))
	tg.Inject(telegramfake.Incoming{Chat: aliceDM, From: tgAlice, Text: "the walrus budget is due monday"})
	awaitSent(t, tg, logs, "Alice's answer", func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "walrus") })
	model.Enqueue(llmtest.Text("Bob's answer."))
	tg.Inject(telegramfake.Incoming{Chat: tgForum, Topic: 42, From: tgBob, Text: "@marlowe_test_bot the narwhal plan is secret"})
	awaitSent(t, tg, logs, "Bob's answer", func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "Bob's answer") })

	tg.Inject(telegramfake.Incoming{Chat: aliceDM, From: tgAlice, Text: "export my data"})
	awaitSent(t, tg, logs, "the export's reply", func(s telegramfake.Sent) bool {
		return s.ChatID == aliceDM.ID && strings.Contains(s.Text, "Here is everything I keep about you")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { return len(tg.Documents()) > 0 }); err != nil {
		t.Fatalf("no document uploaded; calls logged:\n%s", logs.String())
	}
	docs := tg.Documents()
	if len(docs) != 1 || docs[0].ChatID != aliceDM.ID || !strings.HasSuffix(docs[0].Name, ".json") {
		t.Fatalf("documents: %+v", docs)
	}
	var ex engine.Export
	if err := json.Unmarshal(docs[0].Content, &ex); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	body := string(docs[0].Content)
	if ex.User != "501" || !strings.Contains(body, "the walrus budget is due monday") || strings.Contains(body, "narwhal") {
		t.Errorf("export: user %s\n%s", ex.User, body)
	}
}
