package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/delivery"
)

// DefaultAddr is where the sandbox listens when Config.Addr is empty.
const DefaultAddr = "127.0.0.1:8080"

// Limits on what the page may send.
const (
	maxTextBytes = 8000
	maxQueue     = 1000
	maxBody      = 64 << 10
)

// Config configures a Sandbox.
type Config struct {
	// Addr is host:port to listen on; DefaultAddr when empty. An empty host
	// (":8080") means loopback; any other interface must be named.
	Addr string
	// Logger receives operational logs (never message text); slog.Default
	// when nil.
	Logger *slog.Logger
	// Clock is the time source for message times and ids; time.Now when nil.
	Clock func() time.Time
	// DataFile, when set, keeps the workspace's messages as JSON lines so a
	// restart keeps the conversation. Empty: in memory only.
	DataFile string
	// Hosts are the Host header names served besides the loopback ones
	// (localhost, 127.0.0.0/8, ::1), e.g. a machine's name on a LAN. Any
	// other name is refused whatever the bind address (a page on another
	// site that rebinds its name to this address must not reach the
	// workspace). "*" serves every name; only behind a proxy that checks it.
	Hosts []string
	// NoStream shows a run as a checklist message edited in place, as Slack
	// does without its agent surface, instead of the default stream (a plan
	// with tasks and the answer streamed into it; see core.Streamer).
	NoStream bool
}

// Sandbox is the local web workspace. It implements core.Surface.
type Sandbox struct {
	log      *slog.Logger
	now      func() time.Time
	addr     string
	loopback bool
	hosts    map[string]bool // extra Host names served (Config.Hosts)
	anyHost  bool            // Config.Hosts has "*"
	dataFile string
	noStream bool
	dir      *directory
	files    fileStore // files attached in the composer (files.go)

	lnMu    sync.Mutex
	ln      net.Listener
	url     string
	running bool

	closing   chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	closed    bool // closing was closed; no new streams
	streams   sync.WaitGroup
	epoch     string
	seq       int64 // last revision handed out
	lastMicro int64 // time part of the last message id
	msgs      map[string]*message
	keys      map[string]string // idempotency key -> message id
	queue     []inbound
	clicks    uint64            // numbers click delivery keys
	claims    *delivery.Claimer // the delivery contract, in memory
	appended  int               // bytes appended to the data file since it was compacted
	compacted int               // bytes of the data file when it was last compacted
	wake      chan struct{}     // worker wake-up
	subs      map[chan struct{}]struct{}
	typing    map[typingKey]time.Time // conversation -> indicator shown until
	typingRev int64                   // bumped at every change of typing
}

var _ core.Surface = (*Sandbox)(nil)

// message is one message in the workspace, as stored and as sent to pages.
type message struct {
	ID      string     `json:"id"`
	Channel string     `json:"channel"`
	Thread  string     `json:"thread,omitempty"` // root id; "" at top level
	Author  string     `json:"author"`
	Bot     bool       `json:"bot,omitempty"`
	Text    string     `json:"text"`
	Files   []fileView `json:"files,omitempty"` // attached in the composer (files.go)
	Card    *core.Card `json:"card,omitempty"`
	// Stream, on a streamed message of the bot (core.Streamer), is its plan;
	// Text is the text streamed so far.
	Stream    *streamView `json:"stream,omitempty"`
	Reactions []string    `json:"reactions,omitempty"` // the bot's reactions
	Key       string      `json:"key,omitempty"`       // the bot's idempotency key
	At        time.Time   `json:"at"`
	Edited    time.Time   `json:"edited,omitzero"`
	// State of a person's message: pending until deliver returned, then
	// delivered or failed.
	State    string    `json:"state,omitempty"`
	Decision *decision `json:"decision,omitempty"`
	// Notice is a note under a card for everyone; data files of earlier
	// versions have it (a click that could not be delivered). Such news
	// now goes to the clicker alone, as an ephemeral message.
	Notice string `json:"notice,omitempty"`
	// To, when set, makes this an ephemeral message of the bot: only that
	// person's page shows it (PostEphemeral). It is never persisted.
	To string `json:"to,omitempty"`
	// Clicking lists the people whose click on this card is queued or
	// being delivered: their buttons wait, nobody else's do. Not persisted
	// (the queue is not).
	Clicking []string `json:"clicking,omitempty"`
	Rev      int64    `json:"rev"`
}

// decision is the intent filter's verdict on a person's message (Decided).
type decision struct {
	Route  bool   `json:"route"`
	Reason string `json:"reason"`
}

const (
	statePending   = "pending"
	stateDelivered = "delivered"
	stateFailed    = "failed"
)

// inbound is one queued delivery: a person's message (by id) or a click
// (on the card message msgID).
type inbound struct {
	msgID string
	click *core.CardClick
	key   string // a click's delivery key: each press is its own
}

// New returns a sandbox; with cfg.DataFile it loads (and compacts) the
// stored workspace. It does not bind; see Listen and Run.
func New(cfg Config) (*Sandbox, error) {
	s := &Sandbox{
		log:      cfg.Logger,
		now:      cfg.Clock,
		dataFile: cfg.DataFile,
		files:    fileStore{dir: filesDir(cfg.DataFile)},
		noStream: cfg.NoStream,
		dir:      newDirectory(),
		closing:  make(chan struct{}),
		msgs:     map[string]*message{},
		keys:     map[string]string{},
		wake:     make(chan struct{}, 1),
		subs:     map[chan struct{}]struct{}{},
		typing:   map[typingKey]time.Time{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("surface", Platform)
	if s.now == nil {
		s.now = time.Now
	}
	// Like a platform that redelivers an unacknowledged event a few times;
	// the memory deduper keeps a message id delivered once per process (the
	// engine drops one it has journaled across restarts).
	s.claims = delivery.New(dedupe.NewMemory(s.now), delivery.Policy{Attempts: 3}, delivery.WithLogger(s.log))
	var err error
	if s.addr, s.loopback, err = resolveAddr(cfg.Addr); err != nil {
		return nil, err
	}
	s.hosts = map[string]bool{}
	for _, h := range cfg.Hosts {
		switch h = normHost(h); h {
		case "":
		case "*":
			s.anyHost = true
		default:
			s.hosts[h] = true
		}
	}
	if s.dataFile != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	if s.epoch == "" {
		if s.epoch, err = newEpoch(); err != nil {
			return nil, err
		}
	}
	if s.dataFile != "" {
		if err := s.compact(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// reachable is addr as a browser on this machine reaches it: a wildcard
// host (0.0.0.0, [::], which the Host check refuses anyway) is localhost.
func reachable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// resolveAddr applies the default and the loopback rule: an empty host
// binds 127.0.0.1.
func resolveAddr(addr string) (string, bool, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("sandbox: address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), isLoopbackHost(host), nil
}

// normHost is a Host header's (or a configured) name without port,
// brackets, trailing dot or case.
func normHost(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// hostAllowed reports whether a request's Host header names this
// workspace: a loopback name or one of Config.Hosts.
func (s *Sandbox) hostAllowed(hostHeader string) bool {
	h := normHost(hostHeader)
	return s.anyHost || isLoopbackHost(h) || s.hosts[h]
}

func (s *Sandbox) hostList() string {
	if s.anyHost {
		return "* (any)"
	}
	return strings.Join(append([]string{"localhost", "127.0.0.1", "[::1]"}, slices.Sorted(maps.Keys(s.hosts))...), ",")
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newEpoch() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sandbox: epoch: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Name implements core.Surface.
func (s *Sandbox) Name() string { return Platform }

// Self implements core.Surface: the bot's identity in the sandbox.
func (s *Sandbox) Self(context.Context) (core.Identity, error) {
	return core.Identity{UserID: s.dir.bot.ID, Handle: "marlowe", Name: s.dir.bot.Name}, nil
}

// Listen binds the configured address (once) and returns the workspace's
// URL, so the composition root can log it before Run.
func (s *Sandbox) Listen(ctx context.Context) (string, error) {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.ln != nil {
		return s.url, nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return "", fmt.Errorf("sandbox: listen on %s: %w", s.addr, err)
	}
	s.ln = ln
	s.url = "http://" + reachable(ln.Addr()) + "/"
	if !s.loopback {
		s.log.Warn("sandbox listens beyond loopback; it has no authentication", "addr", ln.Addr().String(), "hosts", s.hostList())
	}
	return s.url, nil
}

// Run implements core.Surface: it serves the workspace on the configured
// address (binding it if Listen was not called) and delivers people's
// messages and card clicks, in arrival order, until ctx ends. It returns
// after every goroutine it started and every live event stream has ended.
// Run may be called once.
func (s *Sandbox) Run(ctx context.Context, deliver func(context.Context, core.Inbound) error) error {
	if deliver == nil {
		return errors.New("sandbox: run: nil deliver")
	}
	s.lnMu.Lock()
	if s.running {
		s.lnMu.Unlock()
		return errors.New("sandbox: run: already running")
	}
	s.running = true
	s.lnMu.Unlock()
	if _, err := s.Listen(ctx); err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}

	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Go(func() {
		if err := srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	})
	workCtx, stopWork := context.WithCancel(ctx)
	wg.Go(func() { s.work(workCtx, deliver) })
	s.log.Debug("sandbox workspace serving", "url", s.url) // serve logs it once, as "sandbox ready"

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("sandbox: serve: %w", err)
	}
	stopWork()
	s.shutdownStreams()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutCtx); serr != nil {
		_ = srv.Close()
		if err == nil {
			err = fmt.Errorf("sandbox: shutdown: %w", serr)
		}
	}
	wg.Wait()
	s.streams.Wait()
	return err
}

// shutdownStreams ends every live event stream and refuses new ones.
func (s *Sandbox) shutdownStreams() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
	})
}

// work delivers queued items one at a time, in arrival order.
func (s *Sandbox) work(ctx context.Context, deliver func(context.Context, core.Inbound) error) {
	for {
		item, ok := s.nextItem()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		if item.click != nil {
			s.deliverClick(ctx, deliver, item.msgID, item.key, *item.click)
		} else {
			s.deliverMessage(ctx, deliver, item.msgID)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (s *Sandbox) nextItem() (inbound, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return inbound{}, false
	}
	item := s.queue[0]
	s.queue[0] = inbound{}
	s.queue = s.queue[1:]
	return item, true
}

func (s *Sandbox) enqueueLocked(item inbound) {
	s.queue = append(s.queue, item)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sandbox) deliverMessage(ctx context.Context, deliver func(context.Context, core.Inbound) error, id string) {
	s.mu.Lock()
	m, ok := s.msgs[id]
	var ev core.Event
	if ok {
		ev = s.eventLocked(m)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	_, err := s.claims.Deliver(ctx, "msg:"+id, func(ctx context.Context) error { return deliver(ctx, core.Inbound{Event: &ev}) })
	if err != nil {
		if ctx.Err() != nil {
			return // stays pending: delivered again by the next Run
		}
		s.log.Error("sandbox: deliver message failed", "channel", ev.Scope.Channel, "message", id, "err", err)
		s.change(id, func(m *message) bool { m.State = stateFailed; return true })
		return
	}
	s.change(id, func(m *message) bool { m.State = stateDelivered; return true })
}

// deliverClick hands a click on the card message id to deliver; then the
// clicker's buttons on it are theirs again, and a failed delivery is told
// to them alone.
func (s *Sandbox) deliverClick(ctx context.Context, deliver func(context.Context, core.Inbound) error, id, key string, c core.CardClick) {
	_, err := s.claims.Deliver(ctx, key, func(ctx context.Context) error { return deliver(ctx, core.Inbound{Click: &c}) })
	if err != nil && ctx.Err() == nil {
		s.log.Error("sandbox: deliver card click failed", "channel", c.Scope.Channel, "card", c.Card, "action", c.Action, "err", err)
	} else {
		err = nil // stopping: the click is dropped, as a platform's would be unacknowledged
	}
	s.clickDone(id, c.By.ID, err)
}

// Decided shows the intent filter's decision on a person's message: the
// route/ignore indicator and its reason ("mention", "no-window", ...). The
// composition root calls it from the engine's router (see the package
// documentation); events of other platforms and unknown messages are
// ignored. It is safe to call from any goroutine, and cheap.
func (s *Sandbox) Decided(ev core.Event, route bool, reason string) {
	if ev.Scope.Platform != Platform || ev.MessageID == "" {
		return
	}
	s.change(ev.MessageID, func(m *message) bool {
		if m.Bot || m.Channel != ev.Scope.Channel {
			return false
		}
		if m.Decision != nil && m.Decision.Route == route && m.Decision.Reason == reason {
			return false
		}
		m.Decision = &decision{Route: route, Reason: reason}
		return true
	})
}

// change applies f to a stored message, giving it a new revision, and
// publishes it. Persistence failures are logged: the page still shows the
// change.
func (s *Sandbox) change(id string, f func(*message) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	if !ok {
		return
	}
	nm := *m
	if !f(&nm) {
		return
	}
	if err := s.commitLocked(&nm); err != nil {
		s.log.Error("sandbox: persist message", "message", id, "err", err)
	}
}

// commitLocked stores m under a new revision: persisted first, then
// published to every live stream.
func (s *Sandbox) commitLocked(m *message) error {
	m.Rev = s.seq + 1
	if err := s.appendLocked(m); err != nil {
		return err
	}
	if _, existed := s.msgs[m.ID]; !existed && m.Bot && m.To == "" {
		s.clearTypingLocked(m.Channel, m.Thread)
	}
	s.seq = m.Rev
	s.msgs[m.ID] = m
	if m.Key != "" {
		s.keys[m.Key] = m.ID
	}
	s.compactIfLongLocked()
	for c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	return nil
}

// newIDLocked mints a message id from the clock, Slack style
// ("1767225600.000001"), strictly increasing even when the clock is not.
func (s *Sandbox) newIDLocked(at time.Time) string {
	micro := at.UnixMicro()
	if micro <= s.lastMicro {
		micro = s.lastMicro + 1
	}
	s.lastMicro = micro
	return fmt.Sprintf("%d.%06d", micro/1e6, micro%1e6)
}

func (s *Sandbox) scopeOf(m *message) core.Scope {
	return core.Scope{Platform: Platform, Workspace: Workspace, Channel: m.Channel, Thread: m.Thread}
}

// eventLocked normalises a stored message to a core.Event.
func (s *Sandbox) eventLocked(m *message) core.Event {
	ch, _ := s.dir.channel(m.Channel)
	author := core.Person{ID: m.Author, IsBot: m.Bot}
	if mem, ok := s.dir.member(m.Author); ok {
		author.Name = mem.Name
		author.IsBot = mem.Bot
	}
	mentions, mentionsBot := s.dir.resolveMentions(m.Text)
	text := m.Text
	if !author.IsBot {
		text = stripBotMention(text, s.dir.bot.ID)
	}
	return core.Event{
		Scope:       s.scopeOf(m),
		Visibility:  ch.Visibility,
		MessageID:   m.ID,
		Author:      author,
		Text:        text,
		Mentions:    mentions,
		MentionsBot: mentionsBot,
		At:          m.At,
		Attachments: attachmentsOf(m.Files),
	}
}
