package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// BenchmarkTelegramAnswer is the answer overhead a person sees on
// Telegram: `serve` in process, long polling the Bot API fake, a model
// fake that answers at once; one op is one mention in a group, asked when
// the last one was answered and at most 8 a second, timed from the
// update's injection to the answer's sendMessage. Each mention is in its
// own group and a mention makes three calls (reaction, typing, answer), so
// neither the per-chat pacing nor the bot-wide 30 calls a second waits. It reports the answer p50/p99 for each
// store (MARLOWE_BENCH_STORE=sqlite|postgres runs one).
//
//	go test -run '^$' -bench TelegramAnswer -benchtime 200x ./cmd/bot/
func BenchmarkTelegramAnswer(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		if only := os.Getenv("MARLOWE_BENCH_STORE"); only != "" && only != store {
			continue
		}
		b.Run("store="+store, func(b *testing.B) {
			dbURL := ""
			if store == "postgres" {
				dbURL = testpg.New(b)
			}
			telegramAnswer(b, dbURL)
		})
	}
}

func telegramAnswer(b *testing.B, dbURL string) {
	tg := telegramfake.New(telegramfake.Config{})
	b.Cleanup(tg.Close)
	model := llmtest.NewOpenAIServer(b)
	vars := map[string]string{
		"MARLOWE_DATA_DIR":          b.TempDir(),
		"MARLOWE_HTTP_ADDR":         "127.0.0.1:0",
		"MARLOWE_DATABASE_URL":      dbURL,
		"TELEGRAM_BOT_TOKEN":        tg.Config().Token,
		"MARLOWE_TELEGRAM_API_URL":  tg.URL(),
		"MARLOWE_MODEL_PROVIDER":    "openai",
		"MARLOWE_MODEL":             "fake",
		"MARLOWE_MODEL_BASE_URL":    model.URL,
		"MARLOWE_MODEL_MAX_RETRIES": "0",
		"MARLOWE_LOG_LEVEL":         envOr("MARLOWE_BENCH_LOG", "warn"),
	}
	logs := serveBench(b, vars)
	ctx := b.Context()
	bot := "@" + tg.Bot().Username
	ask := func(n int) time.Duration {
		chat := telegramfake.Chat{ID: -4000000 - int64(n), Type: "group", Title: fmt.Sprintf("g%d", n)}
		tag := fmt.Sprintf("tga%06d", n)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		start := time.Now()
		tg.Inject(telegramfake.Incoming{Chat: chat, From: tgAlice, Text: bot + " please echo " + tag})
		err := tg.Wait(wctx, func() bool {
			sent := tg.Sent()
			for i := len(sent) - 1; i >= 0; i-- {
				if sent[i].ChatID == chat.ID && strings.Contains(sent[i].Text, tag) {
					return true
				}
			}
			return false
		})
		if err != nil {
			b.Fatalf("mention %d never answered:\n%s", n, logs.String())
		}
		return time.Since(start)
	}
	ask(-1) // the bot is up and polling
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for n := range b.N {
		next := time.Now().Add(time.Second / 8)
		lat = append(lat, ask(n))
		time.Sleep(time.Until(next))
	}
	b.StopTimer()
	b.ReportMetric(quantileMS(lat, 0.50), "p50-answer-ms")
	b.ReportMetric(quantileMS(lat, 0.99), "p99-answer-ms")
}
