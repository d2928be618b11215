// Package testengine starts a real engine for an adapter's end-to-end
// tests: an in-memory journal, the real intent filter (in-process windows)
// as router and post observer, and the given model. It is test support
// only: nothing outside _test.go files imports it.
package testengine

import (
	"context"
	"log/slog"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
)

// Start builds and starts the engine over surface (registered under its
// Name) and closes it when tb ends. logger may be nil; opts adjust the
// configuration (tracing, for one).
func Start(tb testing.TB, surface core.Surface, model core.Model, logger *slog.Logger, opts ...func(*engine.Config)) (*engine.Engine, *coretest.MemJournal) {
	tb.Helper()
	filter := intent.NewFilter(intent.NewMemoryStore(nil), nil)
	journal := coretest.NewMemJournal(coretest.NewSigner(tb))
	cfg := engine.Config{
		Journal:  journal,
		Boundary: core.NewBoundary(nil),
		Model:    model,
		Surfaces: map[string]core.Surface{surface.Name(): surface},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			d, err := filter.Decide(ctx, ev)
			if err != nil {
				return false, "", err
			}
			return d.Route, d.Reason.String(), nil
		}),
		PostObserver: filter,
		CardKey:      []byte("testengine-card-key-0123456789abcdef"),
		Logger:       logger,
	}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		_ = e.Close()
	})
	return e, journal
}
