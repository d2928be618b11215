// Package discord is Marlowe's Discord surface on bwmarrin/discordgo: it
// holds one gateway session (IDENTIFY with the message intents set
// explicitly, RESUME at resume_gateway_url after op 7, an invalid session or
// a dropped socket), deduplicates by message id, normalises messages and
// button clicks to core events, takes the /marlowe application command
// (slash.go), and posts, edits and reacts through a
// per-channel paced queue with nonce-enforced idempotent creates.
//
// It implements core.Surface and core.Administrators. It decides nothing
// about intent: every person's message is normalised and delivered; the
// engine's router filters.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/delivery"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
	"github.com/marlowe-bot/marlowe/internal/lanes"
)

// Platform is the platform name in scopes and channel keys.
const Platform = "discord"

// Intents are the gateway intents IDENTIFY asks for. MESSAGE_CONTENT is
// privileged and must also be enabled in the developer portal: without it
// guild messages that do not mention the bot arrive with empty content, and
// untagged follow-ups in a thread are silently lost.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// Adapter is the Discord core.Surface.
type Adapter struct {
	// onAck hears how long each delivered event took to acknowledge (ops.go).
	onAck  func(time.Duration)
	cfg    Config
	log    *slog.Logger
	sess   *discordgo.Session
	dedupe dedupe.Deduper
	claims *delivery.Claimer // over dedupe
	now    func() time.Time

	client *http.Client
	rt     http.RoundTripper // under the rebase; nil = http.DefaultTransport
	// files downloads attachments from Discord's CDN: the vetted egress
	// transport (internal/filefetch).
	files http.RoundTripper

	idMu sync.RWMutex
	id   identity

	chans   *chanCache
	guilds  *ttlCache[guildInfo]
	roles   *managedRoles // the bot's managed roles, per guild
	members *ttlCache[[]string]
	hints   *ttlCache[string] // message id → name of the thread to open on it
	// clicksBy holds each person's latest interaction per scope, for
	// ephemeral follow-ups (PostEphemeral).
	clicksBy *ttlCache[clickRef]
	slashes  Interactions // slash commands awaiting their answer (slashanswer.go)
	ledger   *postLedger
	pacer    *pacer
	seen     *lookalikes
	retry    retrier
	gaps     *gaps // what gap fill reads after a re-IDENTIFY
	// gapSource, when set, names the channels to read after every
	// IDENTIFY from the journal (WithGapSource).
	gapSource GapSource
	gapFills  atomic.Int64
	// guildScan is the current session's gap fill's wait for its
	// GUILD_CREATEs (gapguilds.go), nil when none waits.
	guildScan atomic.Pointer[guildScan]
	// identified is set at the first READY (gateway goroutine only): a
	// later READY is a re-IDENTIFY, followed by a gap fill (every READY is,
	// with a gapSource).
	identified bool

	// run state
	runMu    sync.RWMutex
	deliver  func(context.Context, core.Inbound) error
	runCtx   context.Context
	running  bool
	queue    *lanes.Lanes[inbound]
	queueCtx context.Context // ends with Run: a waiting enqueue gives up
	stop     chan struct{}
	bg       sync.WaitGroup
	dialer   *websocket.Dialer
	// reidentify is the pause before IDENTIFY after a non-resumable
	// INVALID_SESSION (Discord asks for 1–5 s).
	reidentify func() time.Duration
	// hold keeps live messages back while a gap fill reads what came
	// before them (gap.go), so each channel's lane gets them in order.
	hold liveHold
}

var (
	_ core.Surface        = (*Adapter)(nil)
	_ core.Administrators = (*Adapter)(nil)
)

type identity struct {
	userID, handle, name string
}

// Option customises an Adapter.
type Option func(*Adapter)

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(a *Adapter) {
		if l != nil {
			a.log = l
		}
	}
}

// WithDeduper replaces the in-process deduper, e.g. with store/redis's when
// several replicas hold gateway sessions for one bot.
func WithDeduper(d dedupe.Deduper) Option {
	return func(a *Adapter) {
		if d != nil {
			a.dedupe = d
		}
	}
}

// WithChannelPace sets the per-channel pacing of REST writes: at most burst
// calls at once, then one per interval (default burst 5, 1 s: Discord's
// message bucket is about 5 per 5 s per channel). interval 0 disables
// pacing; 429 retry_after is honoured either way.
func WithChannelPace(interval time.Duration, burst int) Option {
	return func(a *Adapter) {
		a.pacer = newPacer(a.now, nil, paceConfig{interval: interval, burst: max(burst, 1)}, a.log)
	}
}

// WithFileTransport sets the transport for downloads from Discord's CDN
// (default: internal/egress's, with no proxy). The composition root passes
// egress.NewPlatformTransport with the operator's proxy settings, so a
// deployment that reaches Discord only through a proxy can download files.
// The host allow-list, size cap and timeout do not depend on it.
func WithFileTransport(rt http.RoundTripper) Option {
	return func(a *Adapter) {
		if rt != nil {
			a.files = rt
		}
	}
}

// WithTransport sets the RoundTripper under the REST rebase (tests).
func WithTransport(rt http.RoundTripper) Option {
	return func(a *Adapter) { a.rt = rt }
}

// New builds the adapter. It validates cfg but makes no network call.
func New(cfg Config, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	sess, err := discordgo.New("Bot " + cfg.BotToken)
	if err != nil {
		return nil, fmt.Errorf("discord: session: %w", err)
	}
	a := &Adapter{
		cfg:    cfg,
		log:    slog.Default(),
		sess:   sess,
		now:    time.Now,
		client: &http.Client{Timeout: 30 * time.Second},
		files:  filefetch.NewEgress(),
		chans:  newChanCache(20000),
		roles:  newManagedRoles(),
		seen:   newLookalikes(),
		gaps:   newGaps(10000),
		retry:  retrier{poll: time.Second, base: 2 * time.Second, maxWait: 5 * time.Minute, kick: make(chan struct{}, 1)},
		dialer: &websocket.Dialer{HandshakeTimeout: 15 * time.Second, Proxy: http.ProxyFromEnvironment},
		reidentify: func() time.Duration {
			return time.Second + rand.N(4*time.Second)
		},
	}
	a.ledger = newPostLedger(a.now, 24*time.Hour, 50000)
	a.pacer = newPacer(a.now, nil, paceConfig{interval: time.Second, burst: 5}, a.log)
	for _, o := range opts {
		o(a)
	}
	a.pacer.log = a.log
	a.guilds = newTTLCache[guildInfo](a.now, time.Minute, 1000)
	a.members = newTTLCache[[]string](a.now, time.Minute, 10000)
	a.hints = newTTLCache[string](a.now, 15*time.Minute, 10000)
	a.clicksBy = newTTLCache[clickRef](a.now, interactionWindow*time.Second, 10000)
	rb := newRebase(cfg.APIURL, a.rt)
	rb.onGlobal = a.pacer.blockAll
	a.client.Transport = rb
	if a.dedupe == nil {
		a.dedupe = dedupe.NewMemory(a.now)
	}
	a.claims = delivery.New(a.dedupe, delivery.Policy{
		Lease: a.cfg.ClaimTTL, TTL: a.cfg.DedupeTTL, Attempts: 3, FailOpen: true,
	}, delivery.WithLogger(a.log))
	if a.slashes == nil {
		a.slashes = newMemInteractions(a.now)
	}

	// The session is used for REST only; the gateway is driven by
	// gateway() (see its comment for why not Session.Open).
	sess.Client = a.client
	sess.ShouldReconnectOnError = false
	sess.ShouldReconnectVoiceOnSessionError = false
	// 429s come back to the pacer, which waits retry_after with the
	// channel's queue re-ordered by priority; discordgo would sleep inside
	// the call holding the route bucket.
	sess.ShouldRetryOnRateLimit = false
	sess.MaxRestRetries = 2 // 5xx only; creates carry an enforced nonce
	sess.LogLevel = -1      // discordgo logs through the standard logger; ours are below
	// The adapter keeps its own small caches (channels, guild roles) as
	// values; discordgo's State hands out shared pointers.
	sess.StateEnabled = false
	return a, nil
}

// Name implements core.Surface.
func (a *Adapter) Name() string { return Platform }

// Self implements core.Surface with GET users/@me (and refreshes the cached
// identity used to resolve mentions).
func (a *Adapter) Self(ctx context.Context) (core.Identity, error) {
	id, err := a.refreshIdentity(ctx)
	if err != nil {
		return core.Identity{}, err
	}
	return core.Identity{UserID: id.userID, Handle: id.handle, Name: id.name}, nil
}

func (a *Adapter) identity() identity {
	a.idMu.RLock()
	defer a.idMu.RUnlock()
	return a.id
}

func (a *Adapter) refreshIdentity(ctx context.Context) (identity, error) {
	u, err := a.sess.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return identity{}, fmt.Errorf("discord: users/@me: %w", err)
	}
	if u == nil || u.ID == "" {
		return identity{}, errors.New("discord: users/@me returned no id (is DISCORD_BOT_TOKEN a bot token?)")
	}
	return a.setIdentity(u), nil
}

// setIdentity stores the bot user from READY or users/@me; a changed id
// (another application's token) is logged.
func (a *Adapter) setIdentity(u *discordgo.User) identity {
	name := u.GlobalName
	if name == "" {
		name = u.Username
	}
	a.idMu.Lock()
	old := a.id
	a.id = identity{userID: u.ID, handle: u.Username, name: name}
	id := a.id
	a.idMu.Unlock()
	if old.userID != "" && old.userID != id.userID {
		a.log.Warn("discord: bot user id changed", "old", old.userID, "new", id.userID)
	}
	return id
}

// readyUser takes the bot user from READY.
func (a *Adapter) readyUser(raw json.RawMessage) {
	var u discordgo.User
	if len(raw) > 0 && json.Unmarshal(raw, &u) == nil && u.ID != "" {
		a.setIdentity(&u)
	}
}
