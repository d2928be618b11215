package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/adapters/sandbox"
	"github.com/marlowe-bot/marlowe/adapters/slack"
	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/internal/egress"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
	"github.com/marlowe-bot/marlowe/llm"
	"github.com/marlowe-bot/marlowe/signin"
	redisstore "github.com/marlowe-bot/marlowe/store/redis"
	"github.com/marlowe-bot/marlowe/tools"
)

func cmdServe(ctx context.Context, cfg config, args []string, stderr io.Writer) error {
	if len(args) > 0 {
		return usageErr("serve takes no arguments (configuration is by environment)")
	}
	log := newLogger(stderr, cfg.LogLevel)
	for _, u := range unknownVars(settingNames(cfg.Getenv)) {
		log.Warn("unknown setting: " + u.String())
	}
	// Configuration errors first, before anything is created on disk.
	tracing, err := telemetry.FromEnv(ctx, cfg.Getenv)
	if err != nil {
		return fmt.Errorf("tracing configuration: %w", err)
	}
	defer flushTraces(tracing, log)
	alerts := newAlertMetrics()
	model, embedder, info, err := llm.FromEnv(cfg.Getenv, llm.WithLogger(log),
		llm.WithHTTPClient(&http.Client{Transport: tracing.Transport(nil)}),
		llm.WithFailoverHook(alerts.failedOver))
	if err != nil {
		return fmt.Errorf("model configuration: %w", err)
	}
	log.Info("tracing", "traces", tracing.Description)
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	trusted, err := checkJournalSigners(ctx, cfg, st)
	if err != nil {
		return err
	}
	log.Info("store ready", "store", st.Desc, "signing_key", st.KeySrc, "key_id", st.Signer.KeyID(), "verify_keys", trusted.KeyIDs()[1:], "data_dir", cfg.DataDir)

	// Redis, when configured, holds intent windows and dedupe keys so that
	// several replicas agree; without it both live in this process.
	var rdb *goredis.Client
	if cfg.RedisURL != "" {
		if err := strictURL("MARLOWE_REDIS_URL", cfg.RedisURL); err != nil {
			return err
		}
		opt, err := goredis.ParseURL(cfg.RedisURL)
		if err != nil {
			return redisURLError(cfg.RedisURL)
		}
		rdb = goredis.NewClient(opt)
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("connect to redis %s: %w", redactDSN(cfg.RedisURL), err)
		}
		log.Info("redis ready", "url", redactDSN(cfg.RedisURL))
	}

	filter, err := newFilter(ctx, st.Journal, rdb, log)
	if err != nil {
		return err
	}

	if info.Configured {
		log.Info("model configured", "model", info.Description)
	} else {
		log.Warn("no model configured: serving the offline command grammar only (mention the bot with `help` for the list)",
			"configure", "MARLOWE_MODEL_PROVIDER=openai MARLOWE_MODEL=<name> MARLOWE_MODEL_BASE_URL=<any OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama> [OPENAI_API_KEY=...]")
	}

	boundary := core.NewBoundary(nil)
	mem, err := newMemory(st, boundary, embedder, core.Policy{}, log)
	if err != nil {
		return err
	}
	if embedder == nil {
		log.Info("memory recall is lexical only (no embedding model configured)", "configure", "MARLOWE_EMBEDDING_MODEL=<name> [MARLOWE_EMBEDDING_BASE_URL=...]")
	}

	// One egress client for every tool: public addresses only, no proxy.
	// One election mechanism for the routine firer and the Telegram
	// poller: the database's lease table when there is one.
	elect := newElector(st, cfg)
	sched, err := newScheduler(cfg.Getenv, st.Journal, boundary, elect, log)
	if err != nil {
		return fmt.Errorf("routines: %w", err)
	}
	registry, err := gate.NewRegistry(append(tools.Builtins(tools.Options{HTTPClient: egress.NewClient()}), sched.Tool(), sched.ProposeTool())...)
	if err != nil {
		return fmt.Errorf("tool registry: %w", err)
	}
	// Connectors (MCP servers) offer their tools through the registry.
	connCfg, err := loadConnectors(cfg.Getenv)
	if err != nil {
		return err
	}
	connMetrics := newConnectorMetrics()
	// Per-person sign-in for the connectors in "person" identity mode.
	si, err := newSignIn(cfg, st, personServers(connCfg), log)
	if err != nil {
		return err
	}
	var conns *connectors.Manager
	if connCfg != nil {
		conns = startConnectors(ctx, connCfg, connMetrics, si, tracing, log)
		defer conns.Close()
		registry = registry.WithSource(conns, connCfg.FindToolAfter)
	}

	surfaces, err := newSurfaces(cfg, rdb, elect, st.Deliveries, st.Journal, log)
	if err != nil {
		return err
	}

	router := core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
		d, err := filter.Decide(ctx, ev)
		if err != nil {
			return false, "", err
		}
		if surfaces.sandbox != nil {
			surfaces.sandbox.Decided(ev, d.Route, d.Reason.String())
		}
		return d.Route, d.Reason.String(), nil
	})

	reader, err := newAttachmentReader(cfg, log)
	if err != nil {
		return err
	}
	metrics := newMetrics(filter, mem, surfaces.byName)
	metrics.alerts = alerts
	alerts.register(metrics.reg)
	connMetrics.register(metrics.reg)
	eng, err := engine.New(engine.Config{
		Attachments:  reader,
		Blobs:        st.Blobs,
		Exports:      st.Exports,
		Connections:  si.connections(),
		ExportURL:    cfg.PublicURL,
		Journal:      st.Journal,
		Boundary:     boundary,
		Model:        model,
		Memory:       mem.Memory,
		Tools:        registry,
		Surfaces:     surfaces.byName,
		Router:       router,
		PostObserver: metrics.observePosts(filter),
		Logger:       log,
		CardKey:      st.Signer.DeriveKey("card-tokens"),
		// Checkpoints are checked with the keys serve trusts (retired
		// ones too), never sniffed from the journal (a wrapper hides it).
		Verifier:      trusted,
		Operators:     cfg.Admins,
		ApprovalTTL:   cfg.ApprovalTTL,
		MaxInputChars: cfg.MaxInputChars,
		Leases:        st.Leases,
		Replica:       cfg.Replica,
		LeaseTTL:      cfg.LeaseTTL,
		Metrics:       metrics,
		Tracing:       engineTracing(tracing, info),
		Prices:        cfg.Prices,
	})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if si != nil {
		si.events.set(eng)
	}
	metrics.engine, metrics.draining = eng.Stats, eng.Draining
	metrics.channelsOwned = eng.OwnedChannels
	// A surface with a home page (Slack's App Home) shows the person's inbox when opened.
	for name, s := range surfaces.byName {
		if h, ok := s.(interface {
			SetHomeOpened(func(context.Context, string) error)
		}); ok {
			h.SetHomeOpened(func(ctx context.Context, user string) error { return eng.PublishHome(ctx, name, user) })
		}
		// Slack's assistant panel suggests prompts from what waits for the person.
		if h, ok := s.(interface {
			SetPanelHints(func(context.Context, string) (core.PanelHints, error))
		}); ok {
			h.SetPanelHints(func(ctx context.Context, user string) (core.PanelHints, error) {
				return eng.PanelHints(ctx, name, user)
			})
		}
	}

	mux := http.NewServeMux()
	mux.Handle("GET /healthz", healthHandler(surfaces.byName))
	checks := append(append([]readyCheck{drainCheck(eng, ctx.Done())}, readyChecks(st.Journal, rdb, surfaces.byName)...),
		readyCheck{name: "leases", check: func(context.Context) error { return eng.LeaseHealth() }})
	if conns != nil {
		checks = append(checks, connectorsCheck(conns))
	}
	mux.Handle("GET /readyz", readyHandler(checks))
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /export", exportHandler(eng))
	if si != nil {
		h := si.svc.Handler()
		mux.Handle(signin.StartPath, h)
		mux.Handle(signin.CallbackPath, h)
		mux.Handle(signin.ClientMetadataPath, h)
	}
	if surfaces.slackHTTP != nil {
		mux.Handle("/slack/", surfaces.slackHTTP)
	}
	if surfaces.discordHTTP != nil {
		mux.Handle("/discord/", surfaces.discordHTTP)
	}
	if surfaces.telegramHTTP != nil {
		mux.Handle("/telegram/", surfaces.telegramHTTP)
	}
	srv, addr, err := listenHTTP(ctx, cfg.HTTPAddr, mux, log)
	if err != nil {
		return listenError("MARLOWE_HTTP_ADDR", cfg.HTTPAddr, err)
	}
	base := browseURL(addr)
	log.Info("http listening", "health", base+"/healthz", "ready", base+"/readyz", "metrics", base+"/metrics")
	// The sandbox's port too, before anything starts: a port in use is a
	// start-up error, not one after "engine started".
	sandboxURL := ""
	if surfaces.sandbox != nil {
		if sandboxURL, err = surfaces.sandbox.Listen(ctx); err != nil {
			_ = srv.Close()
			return listenError("MARLOWE_SANDBOX_ADDR", sandboxAddr(cfg), err)
		}
	}

	// Two lifetimes: intake (surfaces reading, routines firing) ends at
	// the signal; the engine outlives it by the drain, so in-flight runs
	// can still post, and ends only when serve closes it.
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	intake, stopIntake := context.WithCancel(ctx)
	defer stopIntake()
	var bg sync.WaitGroup
	if st.Listen != nil {
		// Other replicas' appends wake this one for the channels it owns.
		// Listening starts before Start so nothing journaled meanwhile is
		// missed (a reconnect wakes every loaded channel).
		bg.Go(func() {
			st.Listen(engineCtx, func(ch core.ChannelKey, seq uint64) { eng.Wake(engineCtx, ch, seq) },
				func(err error) { log.Warn("journal notifications interrupted; reconnecting", "error", err) })
		})
		log.Info("replica", "id", eng.Replica(), "lease_ttl", cfg.LeaseTTL)
	}
	if err := eng.Start(engineCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("start engine: %w", err)
	}
	if surfaces.sandbox != nil {
		log.Info("sandbox ready: open this in a browser to talk to Marlowe", "url", sandboxURL)
	}
	waitProbe := func() {}
	if info.Configured || info.Embedding != nil {
		waitProbe = probeModels(intake, cfg, log)
	}

	// Each surface runs until intake ends; one failing stops the bot
	// rather than leaving it half-connected.
	var wg sync.WaitGroup
	errc := make(chan error, len(surfaces.byName))
	for name, s := range surfaces.byName {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(intake, eng.Deliver); err != nil && intake.Err() == nil {
				errc <- fmt.Errorf("surface %s: %w", name, err)
				stopIntake()
			}
		}()
		log.Info("surface running", "platform", name)
	}

	wg.Add(1)
	go func() { defer wg.Done(); runScheduler(intake, sched, eng, log) }()
	if cfg.Retention > 0 {
		wg.Go(func() { runRetention(intake, eng, elect, cfg.Retention, log) })
	}
	if si != nil {
		platforms := slices.Sorted(maps.Keys(surfaces.byName))
		wg.Go(func() { sweepSignIns(intake, si.svc, platforms, signInSweepEvery, log) })
	}

	if rdb != nil {
		bg.Go(func() {
			watchRedisEpoch(engineCtx, redisEpochInterval, st.Journal, redisstore.NewWindowStore(rdb, "marlowe:"), redisstore.NewEpoch(rdb, "marlowe:"), log)
		})
	}

	<-intake.Done()
	// Surfaces first: one that is never redelivered to (Discord's gateway)
	// delivers what it had queued before its Run returns, which the engine
	// must still take; then the engine drains its runs, in what is left of
	// the drain.
	stopping := time.Now()
	wg.Wait()
	left := cfg.DrainTimeout - time.Since(stopping)
	if cfg.DrainTimeout > 0 {
		left = max(time.Second, left)
	}
	drainErr := drain(eng, left, log)
	waitProbe()
	stopEngine()
	engErr := eng.Close()
	bg.Wait()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	httpErr := srv.Shutdown(shutCtx)
	var runErr error
	select {
	case runErr = <-errc:
	default:
	}
	if err := errors.Join(runErr, drainErr, engErr, httpErr); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// newFilter builds the intent filter over Redis windows (shared by replicas)
// or in-process windows rebuilt from the journal's message.posted commands.
// Redis windows are rebuilt too whenever Redis comes up empty (see
// watchRedisEpoch).
func newFilter(ctx context.Context, j core.Journal, rdb *goredis.Client, log *slog.Logger) (*intent.Filter, error) {
	if rdb != nil {
		ws := redisstore.NewWindowStore(rdb, "marlowe:")
		if _, err := rebuildIfLost(ctx, j, ws, redisstore.NewEpoch(rdb, "marlowe:"), log); err != nil {
			return nil, err
		}
		return intent.NewFilter(ws, nil, intent.WithLogger(log)), nil
	}
	store := intent.NewMemoryStore(nil)
	if _, err := rebuildWindows(ctx, j, store, log); err != nil {
		return nil, err
	}
	return intent.NewFilter(store, nil, intent.WithLogger(log)), nil
}

type surfaceSet struct {
	byName    map[string]core.Surface
	sandbox   *sandbox.Sandbox
	slackHTTP http.Handler
	// discordHTTP serves /discord/interactions (DISCORD_PUBLIC_KEY).
	discordHTTP http.Handler
	// telegramHTTP serves /telegram/webhook (MARLOWE_TELEGRAM_MODE=webhook).
	telegramHTTP http.Handler
}

// newSurfaces starts the configured platforms, and the sandbox when no
// platform is configured or MARLOWE_SANDBOX=1.
func newSurfaces(cfg config, rdb *goredis.Client, elect elector, queue core.DeliveryQueue, j core.Journal, log *slog.Logger) (surfaceSet, error) {
	set, err := newPlatforms(cfg, rdb, elect, queue, j, log)
	if err != nil {
		return set, err
	}
	if len(set.byName) > 0 && cfg.Getenv("MARLOWE_SANDBOX") != "1" {
		log.Info("sandbox off: a platform is configured", "platforms", slices.Sorted(maps.Keys(set.byName)), "enable", "MARLOWE_SANDBOX=1 runs it alongside")
	}
	if len(set.byName) == 0 || cfg.Getenv("MARLOWE_SANDBOX") == "1" {
		stream := cfg.Getenv("MARLOWE_SANDBOX_STREAM")
		if stream != "" && stream != "0" && stream != "1" {
			return set, fmt.Errorf("MARLOWE_SANDBOX_STREAM=%q: want 1 (the default: runs stream their plan and answer) or 0 (the checklist)", stream)
		}
		sb, err := sandbox.New(sandbox.Config{
			Addr:     cfg.Getenv("MARLOWE_SANDBOX_ADDR"),
			Hosts:    strings.Split(cfg.Getenv("MARLOWE_SANDBOX_HOSTS"), ","), // besides loopback names
			Logger:   log,
			DataFile: filepath.Join(cfg.DataDir, "sandbox.jsonl"),
			NoStream: stream == "0",
		})
		if err != nil {
			return set, fmt.Errorf("sandbox: %w", err)
		}
		set.byName[sb.Name()] = sb
		set.sandbox = sb
	}
	return set, nil
}

// newPlatforms builds each platform whose settings are given: Slack when any
// of its settings is (so a missing token is reported, not silently replaced
// by the sandbox). It connects to nothing; bot doctor uses it too. j, when
// set, tells Discord's gap fill where the conversations were.
func newPlatforms(cfg config, rdb *goredis.Client, elect elector, queue core.DeliveryQueue, j core.Journal, log *slog.Logger) (surfaceSet, error) {
	set := surfaceSet{byName: map[string]core.Surface{}}
	files := platformFiles(cfg)
	if slackConfigured(cfg.Getenv) {
		scfg, err := slack.ConfigFromEnv(cfg.Getenv)
		if err != nil {
			return set, fmt.Errorf("slack configuration: %w", err)
		}
		// Told to stop, Socket Mode delivers what it had queued within half
		// the drain, as Discord does; the engine drains its runs in the rest.
		scfg.DrainTimeout = cfg.DrainTimeout / 2
		opts := []slack.Option{slack.WithLogger(log), slack.WithFileTransport(files)}
		if rdb != nil {
			opts = append(opts, slack.WithDeduper(redisstore.NewDeduper(rdb, "marlowe:slack:")))
		}
		a, err := slack.New(scfg, opts...)
		if err != nil {
			return set, fmt.Errorf("slack: %w", err)
		}
		set.byName[a.Name()] = a
		if scfg.Mode == slack.ModeHTTP {
			set.slackHTTP = a.Handler()
		}
		log.Info("slack configured", "mode", scfg.Mode)
	}
	if err := addDiscord(&set, cfg, rdb, queue, j, files, log); err != nil {
		return set, err
	}
	if err := addTelegram(&set, cfg, rdb, elect, files, log); err != nil {
		return set, err
	}
	return set, nil
}

// platformFiles is the transport for downloads from the platforms' own
// file hosts: egress's, through the proxy HTTPS_PROXY / HTTP_PROXY /
// NO_PROXY name (read here, once, at start), since a deployment may reach
// Slack, Discord and Telegram only through one. fetch_url never takes it.
func platformFiles(cfg config) http.RoundTripper {
	return egress.NewPlatformTransport(egress.ProxyFromEnv(cfg.Getenv))
}

// slackConfigured reports whether the environment asks for Slack: a token,
// the signing secret or a mode.
func slackConfigured(getenv func(string) string) bool {
	for _, k := range []string{slack.EnvBotToken, slack.EnvAppToken, slack.EnvSigningSecret, slack.EnvMode} {
		if getenv(k) != "" {
			return true
		}
	}
	return false
}

// listenHTTP binds addr now (so a port clash fails start-up loudly) and
// serves in the background until Shutdown.
func listenHTTP(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (*http.Server, string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// drain is a graceful stop's first half: the engine refuses new deliveries
// at once (surfaces leave them unacknowledged, so the platform redelivers
// them; /readyz says 503) and in-flight runs get up to timeout to finish
// or park. Runs still going then are closed mid-step and resume from the
// journal at the next start: a timeout is logged, not an error.
func drain(e *engine.Engine, timeout time.Duration, log *slog.Logger) error {
	log.Info("shutting down: draining in-flight runs", "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := e.Drain(ctx)
	switch {
	case err == nil:
		log.Info("drained: no run in flight")
	case errors.Is(err, context.DeadlineExceeded):
		log.Warn("drain timed out; unfinished runs resume from the journal at the next start", "timeout", timeout, "busy_threads", e.Stats().Busy)
	default:
		return err
	}
	return nil
}
