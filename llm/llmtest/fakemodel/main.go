// Command fakemodel serves the llmtest fakes on a local port, so the bot can
// be run by hand without a real model. It answers deterministically: chat
// requests with a short echo of the last message, embeddings with hashed
// vectors.
//
//	go run ./llm/llmtest/fakemodel -addr 127.0.0.1:8089
//	MARLOWE_MODEL_PROVIDER=openai MARLOWE_MODEL=fake-model \
//	MARLOWE_MODEL_BASE_URL=http://127.0.0.1:8089/v1 go run ./cmd/bot
//
// (or MARLOWE_MODEL_PROVIDER=anthropic with MARLOWE_MODEL_BASE_URL=http://127.0.0.1:8089).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8089", "listen address")
	dims := flag.Int("dims", 8, "dimension of embedding vectors")
	flag.Parse()

	openai := llmtest.NewOpenAI()
	openai.SetDims(*dims)
	anthropic := llmtest.NewAnthropic()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Info("request", "method", r.Method, "path", r.URL.Path)
		if strings.HasSuffix(r.URL.Path, "/v1/messages") {
			anthropic.ServeHTTP(w, r)
			return
		}
		openai.ServeHTTP(w, r)
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("fake model listening",
		"openai_base_url", "http://"+l.Addr().String()+"/v1",
		"anthropic_base_url", "http://"+l.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	openai.Release()
	anthropic.Release()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
