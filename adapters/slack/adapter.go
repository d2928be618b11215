// Package slack is Marlowe's Slack surface: it receives over Socket Mode or
// the Events API (signature-verified), deduplicates Slack's redeliveries,
// normalises messages and button clicks to core events, and posts, edits
// and reacts through a per-channel paced queue with idempotency keys.
//
// It implements core.Surface. It decides nothing about intent: every message
// event is normalised and delivered; the engine's router filters.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/delivery"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
	"github.com/marlowe-bot/marlowe/internal/lanes"
)

// Adapter is the Slack core.Surface.
type Adapter struct {
	// onAck hears how long each delivered event took to acknowledge (ops.go).
	onAck  func(time.Duration)
	cfg    Config
	log    *slog.Logger
	api    *slack.Client
	dedupe dedupe.Deduper
	claims *delivery.Claimer // over dedupe
	now    func() time.Time
	// socketJobs is the running Socket Mode lanes, for their length.
	socketJobs atomic.Pointer[lanes.Lanes[socketJob]]

	// httpClient is a plain client, never slack-go's retrying one: a lost
	// chat.postMessage response must not become a second post (Post does
	// its own, key-checked retries).
	httpClient *http.Client
	// files downloads shared files from Slack's own file host: the vetted
	// egress transport (internal/filefetch).
	files http.RoundTripper

	lookalike  bool
	pace       paceConfig
	historyGap time.Duration
	ambiguous  func(error) bool

	idMu sync.RWMutex
	id   identity

	vis    *visCache
	ledger *postLedger
	pacer  *pacer

	histMu   sync.Mutex
	histLast time.Time

	// agent: the app has Slack's agent surface (agent.go); streams is what
	// this process knows of its streamed messages.
	agent       atomic.Bool
	agentKnown  atomic.Bool // a detection succeeded
	agentMu     sync.Mutex  // one detection at a time
	agentWas    bool        // under agentMu: what was last logged
	streams     streamBook
	streamChunk int

	ready  readiness   // see Ready
	admins *adminCache // see IsAdmin
	home   homeHook    // see SetHomeOpened

	assist assistantHook // see SetInboxCount

	// run state: the deliver func of the active Run (HTTP mode serves
	// requests through it) and its background work.
	runMu   sync.RWMutex
	deliver func(context.Context, core.Inbound) error
	running bool
	// starting: a Run is resolving the bot's identity; HTTP deliveries
	// wait for it (503), since a mention cannot be told from chatter
	// before the bot knows its own user id.
	starting bool
	bg       sync.WaitGroup
}

var _ core.Surface = (*Adapter)(nil)

type identity struct {
	userID, handle, name, teamID, botID string
}

// Option customises an Adapter.
type Option func(*Adapter)

// WithFileTransport sets the transport for downloads from files.slack.com
// (default: internal/egress's, with no proxy). The composition root passes
// egress.NewPlatformTransport with the operator's proxy settings, so a
// deployment that reaches Slack only through a proxy can download files.
// The host allow-list, size cap and timeout do not depend on it.
func WithFileTransport(rt http.RoundTripper) Option {
	return func(a *Adapter) {
		if rt != nil {
			a.files = rt
		}
	}
}

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) {
		if l != nil {
			a.log = l
		}
	}
}

// WithDeduper replaces the in-process deduper, e.g. with store/redis's
// when several replicas share one app.
func WithDeduper(d dedupe.Deduper) Option {
	return func(a *Adapter) {
		if d != nil {
			a.dedupe = d
		}
	}
}

// WithoutLookalikeCheck skips the users.list scan for accounts that share
// the bot's name at start.
func WithoutLookalikeCheck() Option {
	return func(a *Adapter) { a.lookalike = false }
}

// WithChannelPace sets the per-channel pacing of Web API writes: at most
// burst calls at once, then one per interval. interval 0 disables
// pacing (429 Retry-After is still honoured). Default: burst 4, 1 s.
func WithChannelPace(interval time.Duration, burst int) Option {
	return func(a *Adapter) {
		if burst < 1 {
			burst = 1
		}
		a.pace = paceConfig{interval: interval, burst: burst}
	}
}

// WithHistoryInterval sets the minimum gap between conversations.replies /
// conversations.history reads (default 1 s; Slack limits these severely).
func WithHistoryInterval(d time.Duration) Option {
	return func(a *Adapter) {
		if d >= 0 {
			a.historyGap = d
		}
	}
}

// New builds the adapter. It validates cfg (naming any missing token) but
// makes no network call: identity is resolved by Run and Self.
func New(cfg Config, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &Adapter{
		cfg:        cfg,
		log:        slog.Default(),
		now:        time.Now,
		httpClient: &http.Client{Timeout: 30 * time.Second},
		files:      filefetch.NewEgress(),
		lookalike:  true,
		pace:       paceConfig{interval: time.Second, burst: 4},
		historyGap: time.Second,
		ambiguous:  isAmbiguous,
	}
	a.streamChunk = DefaultStreamChunkChars
	for _, o := range opts {
		o(a)
	}
	if a.dedupe == nil {
		a.dedupe = dedupe.NewMemory(a.now)
	}
	a.claims = delivery.New(a.dedupe, delivery.Policy{Lease: a.cfg.ClaimTTL, TTL: a.cfg.DedupeTTL}, delivery.WithLogger(a.log))
	clientOpts := []slack.Option{
		slack.OptionAPIURL(cfg.APIURL),
		slack.OptionHTTPClient(a.httpClient), // plain client: no slack.OptionRetry
		slack.OptionLog(slogBridge{l: a.log}),
	}
	if cfg.AppToken != "" {
		clientOpts = append(clientOpts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	a.api = slack.New(cfg.BotToken, clientOpts...)
	a.vis = newVisCache(20000)
	a.admins = newAdminCache(adminTTL, 20000)
	a.ledger = newPostLedger(a.now, 24*time.Hour, 50000)
	a.pacer = newPacer(a.now, nil, a.pace, a.log)
	return a, nil
}

// Name implements core.Surface.
func (a *Adapter) Name() string { return Platform }

// Self implements core.Surface: it asks auth.test for the bot's identity
// (and refreshes the cached one used to resolve mentions).
func (a *Adapter) Self(ctx context.Context) (core.Identity, error) {
	id, err := a.refreshIdentity(ctx)
	if err != nil {
		return core.Identity{}, err
	}
	return core.Identity{UserID: id.userID, Handle: id.handle, Name: id.name}, nil
}

// TeamID is the workspace id resolved by the last auth.test ("" before).
func (a *Adapter) TeamID() string { return a.identity().teamID }

func (a *Adapter) identity() identity {
	a.idMu.RLock()
	defer a.idMu.RUnlock()
	return a.id
}

// refreshIdentity calls auth.test and stores the result. A changed user id
// (the app was reinstalled under another bot user) is logged.
func (a *Adapter) refreshIdentity(ctx context.Context) (identity, error) {
	res, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return identity{}, fmt.Errorf("slack: auth.test: %w", err)
	}
	if res.UserID == "" || res.TeamID == "" {
		return identity{}, errors.New("slack: auth.test returned no user or team id (is SLACK_BOT_TOKEN a bot token?)")
	}
	a.idMu.Lock()
	old := a.id
	a.id.userID, a.id.handle, a.id.teamID, a.id.botID = res.UserID, res.User, res.TeamID, res.BotID
	if a.id.name == "" || old.userID != res.UserID {
		a.id.name = res.User // the display name, once CheckLookalikes has seen it
	}
	id := a.id
	a.idMu.Unlock()
	if old.userID != "" && old.userID != id.userID {
		a.log.Warn("slack: bot user id changed", "old", old.userID, "new", id.userID, "team", id.teamID)
	}
	return id, nil
}

// slogBridge routes slack-go's internal log lines to slog at debug level.
type slogBridge struct{ l *slog.Logger }

func (b slogBridge) Output(_ int, s string) error {
	b.l.Debug("slack-go", "detail", s)
	return nil
}
