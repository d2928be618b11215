// Package telegram is Marlowe's Telegram surface, on
// github.com/go-telegram-bot-api/telegram-bot-api/v5 for transport and
// types. It receives by long polling (one poller per token, behind a Lease)
// or by webhook (secret token checked in constant time), confirms an update
// only after the engine has durably recorded it (or it is ignorable),
// deduplicates on update_id, normalises messages (UTF-16 entity offsets,
// forum topics as channels of their own) and callback queries to core
// events, and posts, edits and reacts through a per-chat paced queue that
// honours retry_after.
//
// What v5.5.1 lacks (message_thread_id, reply_parameters, secret_token,
// setMessageReaction) is sent through the SDK's MakeRequest with this
// package's own structs, and updates are decoded with this package's types,
// which keep the forum fields.
//
// It implements core.Surface, core.Administrators and core.Ephemeral (the
// alert answering a person's own button press). It decides nothing
// about intent: every message is normalised and delivered; the engine's
// router filters.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/delivery"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
)

// Adapter is the Telegram core.Surface.
type Adapter struct {
	// onAck hears how long each delivered event took to acknowledge (ops.go).
	onAck func(time.Duration)
	cfg   Config
	log   *slog.Logger
	now   func() time.Time

	// httpClient has no retries of its own: a lost sendMessage response
	// must not become a second post.
	httpClient *http.Client
	// files downloads files from api.telegram.org: the vetted egress
	// transport (internal/filefetch). A configured API URL (a fake, a
	// self-hosted Bot API server) is reached with httpClient instead.
	files http.RoundTripper
	bot   *tgbotapi.BotAPI

	dedupe  dedupe.Deduper
	claims  *delivery.Claimer // over dedupe
	lease   Lease
	private map[int64]bool
	pace    paceConfig

	idMu sync.RWMutex
	id   identity

	// answerWait is how long a button press waits for the engine before
	// answerCallbackQuery goes out anyway.
	answerWait time.Duration
	// ephemeralGrace is how long a recorded press waits for a refusal to
	// show as its alert (see PostEphemeral).
	ephemeralGrace time.Duration
	presses        pressBook

	pacer  *pacer
	ledger *postLedger
	// attachMaxBytes is the cap a photo's size is chosen under (0: the
	// default); see WithAttachmentMax.
	attachMaxBytes int64
	admins         *adminCache

	runMu   sync.RWMutex
	deliver func(context.Context, core.Inbound) error
	running bool
	bg      sync.WaitGroup
}

var (
	_ core.Surface           = (*Adapter)(nil)
	_ core.Administrators    = (*Adapter)(nil)
	_ core.MembershipChecker = (*Adapter)(nil)
	_ core.AttemptedPoster   = (*Adapter)(nil)
)

type identity struct {
	id       int64
	username string
	name     string
	// readAll is getMe's can_read_all_group_messages: false means privacy
	// mode is on, and untagged group follow-ups never reach the bot.
	readAll bool
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

// WithDeduper replaces the in-process deduper (e.g. store/redis's, shared
// by replicas that receive one webhook).
func WithDeduper(d dedupe.Deduper) Option {
	return func(a *Adapter) {
		if d != nil {
			a.dedupe = d
		}
	}
}

// WithLease sets the lease the poller must hold while it polls (default:
// LocalLease, which is only correct for a single process per token).
func WithLease(l Lease) Option {
	return func(a *Adapter) {
		if l != nil {
			a.lease = l
		}
	}
}

// WithPace sets outbound pacing: per chat one message per chatInterval
// after a burst of chatBurst, at most groupPerMinute messages in any minute
// in a group, and globalPerSecond calls a second overall (reactions and chat
// actions included, on a budget of their own per chat). A zero value disables that
// limit (429 retry_after is always honoured). Default: 1 s, burst 3, 20/min,
// 30/s — Telegram's published limits.
func WithPace(chatInterval time.Duration, chatBurst, groupPerMinute, globalPerSecond int) Option {
	return func(a *Adapter) {
		a.pace = paceConfig{chatInterval: chatInterval, chatBurst: max(chatBurst, 1), groupPerMinute: groupPerMinute, globalPerSecond: globalPerSecond}
	}
}

// WithAttachmentMax sets the size cap attachments are fetched under
// (MARLOWE_ATTACHMENT_MAX_BYTES): a photo is offered at its largest size
// that fits.
func WithAttachmentMax(n int64) Option {
	return func(a *Adapter) { a.attachMaxBytes = n }
}

func (a *Adapter) attachMax() int64 {
	if a.attachMaxBytes > 0 {
		return a.attachMaxBytes
	}
	return DefaultAttachmentMax
}

// WithFileTransport sets the transport for downloads from api.telegram.org
// (default: internal/egress's, with no proxy). The composition root passes
// egress.NewPlatformTransport with the operator's proxy settings, so a
// deployment that reaches Telegram only through a proxy can download files.
// The host allow-list, size cap and timeout do not depend on it.
func WithFileTransport(rt http.RoundTripper) Option {
	return func(a *Adapter) {
		if rt != nil {
			a.files = rt
		}
	}
}

// WithHTTPClient replaces the HTTP client (default: 30 s timeout beyond the
// long-poll, no retries).
func WithHTTPClient(c *http.Client) Option {
	return func(a *Adapter) {
		if c != nil {
			a.httpClient = c
		}
	}
}

// New builds the adapter. It validates cfg but makes no network call: the
// identity is resolved by Run and Self.
func New(cfg Config, opts ...Option) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &Adapter{
		cfg:     cfg,
		log:     slog.Default(),
		now:     time.Now,
		private: map[int64]bool{},
		files:   filefetch.NewEgress(),
		pace:    paceConfig{chatInterval: time.Second, chatBurst: 3, groupPerMinute: 20, globalPerSecond: 30},

		answerWait:     callbackAnswerWait,
		ephemeralGrace: defaultEphemeralGrace,
	}
	for _, id := range cfg.PrivateChats {
		a.private[id] = true
	}
	for _, o := range opts {
		o(a)
	}
	if a.httpClient == nil {
		a.httpClient = &http.Client{Timeout: cfg.PollTimeout + 30*time.Second}
	}
	if a.dedupe == nil {
		a.dedupe = dedupe.NewMemory(a.now)
	}
	a.claims = delivery.New(a.dedupe, delivery.Policy{
		Lease: a.cfg.ClaimTTL, TTL: a.cfg.DedupeTTL, Deadline: a.cfg.DeliverTimeout,
	}, delivery.WithLogger(a.log))
	if a.lease == nil {
		a.lease = LocalLease{}
	}
	a.bot = newBot(cfg.BotToken, cfg.APIURL, a.httpClient)
	a.pacer = newPacer(a.now, nil, a.pace, a.log)
	a.ledger = newPostLedger(a.now, 24*time.Hour, 50000)
	a.admins = newAdminCache(a.now, time.Minute)
	return a, nil
}

// Name implements core.Surface.
func (a *Adapter) Name() string { return Platform }

// Mode is the receive mode in effect.
func (a *Adapter) Mode() Mode { return a.cfg.Mode }

// Self implements core.Surface with getMe (refreshing the identity used to
// recognise mentions).
func (a *Adapter) Self(ctx context.Context) (core.Identity, error) {
	id, err := a.refreshIdentity(ctx)
	if err != nil {
		return core.Identity{}, err
	}
	return core.Identity{UserID: itoa(id.id), Handle: id.username, Name: id.name}, nil
}

// PrivacyMode reports whether the last getMe said privacy mode is on
// (can_read_all_group_messages false): then only mentions, replies to the
// bot and commands reach it in groups. ok is false before the first getMe.
func (a *Adapter) PrivacyMode() (on, ok bool) {
	id := a.identity()
	return !id.readAll, id.id != 0
}

func (a *Adapter) identity() identity {
	a.idMu.RLock()
	defer a.idMu.RUnlock()
	return a.id
}

func (a *Adapter) refreshIdentity(ctx context.Context) (identity, error) {
	var u tgbotapi.User
	if err := a.callInto(ctx, "getMe", nil, &u); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Code == http.StatusUnauthorized {
			// err already says "telegram: getMe: …": no second prefix.
			return identity{}, fmt.Errorf("%w (the token was refused: check %s)", err, EnvBotToken)
		}
		return identity{}, err
	}
	if u.ID == 0 || u.UserName == "" || !u.IsBot {
		return identity{}, errors.New("telegram: getMe returned no bot id or username")
	}
	id := identity{id: u.ID, username: u.UserName, name: u.FirstName, readAll: u.CanReadAllGroupMessages}
	a.idMu.Lock()
	old := a.id
	a.id = id
	a.idMu.Unlock()
	if old.id != 0 && old.id != id.id {
		a.log.Warn("telegram: bot id changed (another token?)", "old", old.id, "new", id.id)
	}
	return id, nil
}

// IsAdmin implements core.Administrators: in a group, the chat's creator and
// administrators (getChatAdministrators, cached for a minute); in a private
// chat, its one person.
// IsMember reports whether userID belongs to the chat channel names
// (getChatMember: creator, administrator, member, or restricted but still
// a member). A private chat's only member is its user.
func (a *Adapter) IsMember(ctx context.Context, channel, userID string) (bool, error) {
	chatID, _, err := parseChannel(channel)
	if err != nil {
		return false, err
	}
	if chatID > 0 {
		return itoa(chatID) == userID, nil
	}
	var m struct {
		Status   string `json:"status"`
		IsMember bool   `json:"is_member"`
	}
	if err := a.callInto(ctx, "getChatMember", params("chat_id", itoa(chatID), "user_id", userID), &m); err != nil {
		return false, err
	}
	switch m.Status {
	case "creator", "administrator", "member":
		return true, nil
	case "restricted":
		return m.IsMember, nil
	}
	return false, nil // left, kicked
}

func (a *Adapter) IsAdmin(ctx context.Context, scope core.Scope, userID string) (bool, error) {
	if err := checkScope(scope); err != nil {
		return false, err
	}
	chatID, _, err := parseChannel(scope.Channel)
	if err != nil {
		return false, err
	}
	if chatID > 0 { // private chat ids are the user's id
		return itoa(chatID) == userID, nil
	}
	ids, err := a.admins.get(ctx, chatID, func(ctx context.Context) (map[string]bool, error) {
		var members []chatMember
		if err := a.callInto(ctx, "getChatAdministrators", params("chat_id", itoa(chatID)), &members); err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, m := range members {
			if m.Status == "creator" || m.Status == "administrator" {
				out[itoa(m.User.ID)] = true
			}
		}
		return out, nil
	})
	if err != nil {
		return false, err
	}
	return ids[userID], nil
}

// adminCache keeps each group's administrator set for a short time.
type adminCache struct {
	now func() time.Time
	ttl time.Duration
	mu  sync.Mutex
	m   map[int64]adminEntry
}

type adminEntry struct {
	ids map[string]bool
	at  time.Time
}

func newAdminCache(now func() time.Time, ttl time.Duration) *adminCache {
	return &adminCache{now: now, ttl: ttl, m: map[int64]adminEntry{}}
}

func (c *adminCache) get(ctx context.Context, chat int64, load func(context.Context) (map[string]bool, error)) (map[string]bool, error) {
	c.mu.Lock()
	e, ok := c.m[chat]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.ids, nil
	}
	ids, err := load(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) > 10000 {
		clear(c.m)
	}
	c.m[chat] = adminEntry{ids: ids, at: c.now()}
	c.mu.Unlock()
	return ids, nil
}

func checkScope(s core.Scope) error {
	if s.Platform != "" && s.Platform != Platform {
		return fmt.Errorf("telegram: scope platform %q is not %q", s.Platform, Platform)
	}
	if s.Channel == "" {
		return errors.New("telegram: scope has no channel")
	}
	return nil
}
