package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
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

// `export my data` in a Discord DM, through `bot serve` and the fake
// gateway and REST API: the JSON is sent there as a message's file
// (multipart payload_json and files[0]), with Alice's kept messages and
// none of Bob's.
func TestServeDiscordExportUpload(t *testing.T) {
	const (
		guild   = "310000000000000001"
		general = "310000000000000010"
		dm      = "410000000000000001"
	)
	alice := discordfake.User{ID: "210000000000000001", Username: "alice"}
	bob := discordfake.User{ID: "210000000000000002", Username: "bob"}
	dc := discordfake.New(discordfake.Config{
		Token: "discord-test-token", EchoPosts: true,
		Guilds: []discordfake.Guild{{ID: guild, OwnerID: bob.ID, Channels: []discordfake.Channel{{ID: general, Name: "general"}}}},
	})
	t.Cleanup(dc.Close)
	model := llmtest.NewOpenAIServer(t)
	logs, _ := serveWith(t, env(map[string]string{
		"MARLOWE_DATA_DIR":        t.TempDir(),
		"MARLOWE_HTTP_ADDR":       "127.0.0.1:0",
		"DISCORD_BOT_TOKEN":       "discord-test-token",
		"MARLOWE_DISCORD_API_URL": dc.APIURL(),
		"MARLOWE_MODEL_PROVIDER":  "openai",
		"MARLOWE_MODEL":           "fake-model",
		"MARLOWE_MODEL_BASE_URL":  model.URL,
	}))
	if !dc.WaitConnected(10 * time.Second) {
		t.Fatalf("the bot never connected to the fake gateway:\n%s", logs.String())
	}
	posted := func(what string, match func(discordfake.Message) bool) {
		t.Helper()
		if !dc.Wait(10*time.Second, func() bool {
			for _, p := range dc.PostsLocked() {
				if match(p) {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no post for %s; posts: %+v\nlogs:\n%s", what, dc.Posts(), logs.String())
		}
	}
	model.Enqueue(llmtest.Text("Noted about the walrus."))
	dc.Say(discordfake.Msg{Channel: dm, Author: alice, Content: "the walrus budget is due monday"})
	posted("Alice's answer", func(m discordfake.Message) bool { return strings.Contains(m.Content, "walrus") })
	model.Enqueue(llmtest.Text("Bob's answer."))
	dc.Say(discordfake.Msg{Channel: general, Author: bob, Content: "<@" + dc.Bot().ID + "> the narwhal plan is secret"})
	posted("Bob's answer", func(m discordfake.Message) bool { return strings.Contains(m.Content, "Bob's answer") })

	dc.Say(discordfake.Msg{Channel: dm, Author: alice, Content: "export my data"})
	posted("the export's reply", func(m discordfake.Message) bool {
		return m.ChannelID == dm && strings.Contains(m.Content, "Here is everything I keep about you")
	})
	files := dc.Attachments()
	if len(files) != 1 || files[0].ChannelID != dm || !strings.HasSuffix(files[0].Name, ".json") {
		t.Fatalf("attachments: %+v", files)
	}
	var ex engine.Export
	if err := json.Unmarshal(files[0].Content, &ex); err != nil {
		t.Fatalf("the file is not JSON: %v", err)
	}
	body := string(files[0].Content)
	if ex.User != alice.ID || !strings.Contains(body, "the walrus budget is due monday") || strings.Contains(body, "narwhal") {
		t.Errorf("export: user %s\n%s", ex.User, body)
	}
}
