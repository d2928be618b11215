package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/marlowe-bot/marlowe/core"
)

// Options tune a Manager. The zero value works.
type Options struct {
	Logger *slog.Logger
	// Getenv supplies the baseline environment of stdio servers (PATH,
	// HOME, LANG, TMPDIR); default os.Getenv.
	Getenv func(string) string
	// HTTPClient, when set, returns the HTTP client for a remote server
	// (nil: a default client). Configured headers are added on top.
	HTTPClient func(server string) *http.Client
	// Observe is told of every call: its server, the server's tool name,
	// how long it took and its outcome (ok, error, tool-error, down,
	// timeout, cancelled). Metrics hang here.
	Observe func(server, tool string, took time.Duration, outcome string)
	// OnState is told each time a server's state changes (logs, tests).
	OnState func(State)
	// ResultCap bounds the text of a result (default DefaultResultCap).
	ResultCap int
	// Backoff bounds the wait before restarting a failed server (defaults
	// 500ms and 30s, doubling).
	MinBackoff, MaxBackoff time.Duration
	// Relist is how often a connected server's tools are listed again
	// even without a list_changed notification (default 10m): a stateless
	// HTTP server cannot send one, and a server may simply not.
	Relist time.Duration
	// Terminate is how long a stopping stdio server gets after its stdin
	// closes before SIGTERM (default 2s).
	Terminate time.Duration
	// Tokens gives the requester's own access token for a server in
	// "person" identity mode (person.go); an error wrapping
	// core.ErrNotSignedIn means they have not connected it (or it lapsed).
	// Nil: person servers ask to sign in and cannot be used.
	Tokens func(ctx context.Context, platform, person, server string) (string, error)
	// Rejected is told when a server refused a token Tokens gave (401),
	// so the grant is refreshed or dropped rather than sent again; the
	// call is then tried once more with the token Tokens gives next.
	Rejected func(ctx context.Context, platform, person, server, tok string) error
	// Tracing makes each tools/call an MCP client span (trace.go; zero:
	// none).
	Tracing Tracing
}

// DefaultRelist is how often a connected server's tools are listed again
// without a notification: one cheap call per server, and an unannounced
// change goes unseen for at most this long.
const DefaultRelist = 10 * time.Minute

// Manager runs the configured servers and offers their tools. It
// implements core.ToolSource.
type Manager struct {
	cfg     *Config
	opts    Options
	log     *slog.Logger
	dial    dialer
	tracer  tracer
	servers []*server // every configured server, disabled ones included

	mu      sync.Mutex
	stop    context.CancelFunc
	stopped chan struct{}
}

// New builds a Manager; Start starts its servers.
func New(cfg *Config, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.ResultCap <= 0 {
		opts.ResultCap = DefaultResultCap
	}
	if opts.Relist <= 0 {
		opts.Relist = DefaultRelist
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 500 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	if opts.Terminate <= 0 {
		opts.Terminate = 2 * time.Second
	}
	tr := newTracer(opts.Tracing)
	m := &Manager{cfg: cfg, opts: opts, log: opts.Logger, tracer: tr,
		dial: dialer{getenv: opts.Getenv, httpClient: opts.HTTPClient, terminate: opts.Terminate, traced: tr.tr != nil}}
	for _, s := range cfg.Servers {
		m.servers = append(m.servers, newServer(m, s))
	}
	return m
}

// Config is the configuration the manager runs.
func (m *Manager) Config() *Config { return m.cfg }

// Start starts every enabled server in the background and returns at
// once: a slow or broken server never holds up start-up or the others.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil {
		return
	}
	ctx, m.stop = context.WithCancel(context.WithoutCancel(ctx))
	m.stopped = make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range m.servers {
		if s.cfg.Disabled {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.cfg.Identity == IdentityPerson {
				s.runPerson(ctx) // person.go: no shared session
				return
			}
			s.run(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(m.stopped)
	}()
}

// Close stops every server and waits until each child has exited.
func (m *Manager) Close() error {
	m.mu.Lock()
	stop, stopped := m.stop, m.stopped
	m.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-stopped
	return nil
}

// WaitReady waits until every enabled server has connected once or
// failed to (tests, doctor).
func (m *Manager) WaitReady(ctx context.Context) error {
	for _, s := range m.servers {
		if s.cfg.Disabled {
			continue
		}
		select {
		case <-s.settled:
		case <-ctx.Done():
			return fmt.Errorf("waiting for server %s: %w", s.cfg.Name, ctx.Err())
		}
	}
	return nil
}

// ToolsIn lists the tools offered in channel ch: every ready server's
// tools that the server's channels and include/exclude lists allow, in
// server then tool order.
func (m *Manager) ToolsIn(ch core.ChannelKey) []core.Tool {
	var out []core.Tool
	for _, s := range m.servers {
		if s.cfg.Disabled || !s.cfg.Offers(ch) {
			continue
		}
		out = append(out, s.toolList()...)
	}
	return out
}

// Tool returns the tool named name from whichever server offers it.
func (m *Manager) Tool(name string) (core.Tool, bool) {
	for _, s := range m.servers {
		if t, ok := s.tool(name); ok {
			return t, true
		}
	}
	return core.Tool{}, false
}

// Offered reports whether tool name may be offered in channel ch.
func (m *Manager) Offered(ch core.ChannelKey, name string) bool {
	for _, s := range m.servers {
		if _, ok := s.tool(name); ok {
			return !s.cfg.Disabled && s.cfg.Offers(ch)
		}
	}
	return false
}

// State is one server's state, for /readyz, doctor and logs.
type State struct {
	Name      string
	Transport string
	Status    string // disabled, starting, ready, down
	Tools     int
	Err       string   // the last failure, when down
	Stderr    []string // a stdio server's last stderr lines
	// RoomHints are offered tools whose arguments look like a chat room
	// ("post_message (channel_id)") and that "rooms" does not declare.
	RoomHints []string
	Since     time.Time
}

// States lists every configured server's state, in name order.
func (m *Manager) States() []State {
	out := make([]State, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.state())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// server is one configured server: its connection loop, its current
// session and tool list.
type server struct {
	m       *Manager
	cfg     Server
	stderr  *tail
	refresh chan struct{}
	// progress routes notifications/progress to the running calls.
	progress progressRoutes
	// spanAttrs are the attributes of every call span (trace.go).
	spanAttrs []attribute.KeyValue
	settled   chan struct{} // closed after the first connect attempt ends
	once      sync.Once

	mu     sync.Mutex
	conn   *connection
	tools  []core.Tool
	byName map[string]core.Tool
	// roomHints: see State.RoomHints.
	roomHints []string
	status    string
	lastErr   error
	since     time.Time
}

func newServer(m *Manager, s Server) *server {
	st := "starting"
	if s.Disabled {
		st = "disabled"
	}
	srv := &server{m: m, cfg: s, stderr: newTail(20, s.secrets), refresh: make(chan struct{}, 1), settled: make(chan struct{}), status: st, since: time.Now()}
	if m.tracer.tr != nil {
		srv.spanAttrs = spanAttrs(s)
	}
	return srv
}

func (s *server) state() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Name: s.cfg.Name, Transport: s.cfg.Type, Status: s.status, Tools: len(s.tools), RoomHints: slices.Clone(s.roomHints), Since: s.since}
	if s.cfg.Type == Stdio {
		st.Stderr = s.stderr.lines()
	}
	if s.lastErr != nil && s.status != "ready" {
		st.Err = s.lastErr.Error()
	}
	return st
}

func (s *server) toolList() []core.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

func (s *server) tool(name string) (core.Tool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byName[name]
	return t, ok
}

func (s *server) setDown(err error) {
	s.mu.Lock()
	s.conn, s.status, s.lastErr, s.since = nil, "down", err, time.Now()
	s.mu.Unlock()
	s.once.Do(func() { close(s.settled) })
	s.m.log.Warn("connector down", "server", s.cfg.Name, "err", err, "stderr", s.stderr.lines())
	s.changed()
}

func (s *server) changed() {
	if s.m.opts.OnState != nil {
		s.m.opts.OnState(s.state())
	}
}

// run keeps the server connected until ctx ends: connect, list, serve
// refreshes, and on a crash restart with doubling backoff.
func (s *server) run(ctx context.Context) {
	backoff := s.m.opts.MinBackoff
	for ctx.Err() == nil {
		up := time.Now()
		err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		s.setDown(err)
		if time.Since(up) > 10*s.m.opts.MinBackoff+10*time.Second {
			backoff = s.m.opts.MinBackoff // it had been up a while: not a crash loop
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.m.opts.MaxBackoff)
	}
}

// session runs one connection until it ends, returning why.
func (s *server) session(ctx context.Context) error {
	newClient := func() *mcp.Client {
		return mcp.NewClient(&mcp.Implementation{Name: "marlowe", Version: "1"}, &mcp.ClientOptions{
			Logger: s.m.log.With("server", s.cfg.Name),
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case s.refresh <- struct{}{}:
				default:
				}
			},
			ProgressNotificationHandler: s.progress.handle,
			Capabilities:                &mcp.ClientCapabilities{}, // no roots, no sampling, no elicitation
		})
	}
	// The connect context lives as long as the connection (the legacy SSE
	// transport's stream hangs off it); a timer bounds the handshake.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(max(s.cfg.Timeout, 30*time.Second), cancel)
	conn, err := s.m.dial.dial(cctx, newClient, s.cfg, s.stderr)
	if !timer.Stop() && err != nil {
		return fmt.Errorf("no answer within %s: %w", max(s.cfg.Timeout, 30*time.Second), err)
	}
	if err != nil {
		return err
	}
	defer conn.close()
	if err := s.list(ctx, conn.session); err != nil {
		return err
	}
	s.mu.Lock()
	s.conn, s.status, s.lastErr, s.since = conn, "ready", nil, time.Now()
	n := len(s.tools)
	s.mu.Unlock()
	s.once.Do(func() { close(s.settled) })
	s.m.log.Info("connector ready", "server", s.cfg.Name, "transport", s.cfg.Type, "tools", n)
	s.changed()
	done := make(chan error, 1)
	go func() { done <- conn.session.Wait() }()
	relist := time.NewTicker(s.m.opts.Relist)
	defer relist.Stop()
	for {
		select {
		case <-relist.C:
			// A change nobody announced: caught at the next listing (and a
			// changed definition is then withheld by the channel's pin).
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		case <-ctx.Done():
			conn.close()
			<-done
			return ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return fmt.Errorf("connection lost: %w", err)
		case <-s.refresh:
			if err := s.list(ctx, conn.session); err != nil {
				s.m.log.Warn("connector tool list refresh failed", "server", s.cfg.Name, "err", err)
				continue
			}
			s.changed()
		}
	}
}

// list fetches every page of the server's tools and replaces the offered
// list.
func (s *server) list(ctx context.Context, sess *mcp.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, max(s.cfg.Timeout, 30*time.Second))
	defer cancel()
	var tools []core.Tool
	var hints []string
	byName := map[string]core.Tool{}
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if !s.cfg.Wants(t.Name) {
			continue
		}
		ct, err := s.coreTool(t)
		if err != nil {
			s.m.log.Warn("connector tool skipped", "server", s.cfg.Name, "tool", t.Name, "err", err)
			continue
		}
		if _, dup := byName[ct.Name]; dup {
			s.m.log.Warn("connector tool skipped: name taken", "server", s.cfg.Name, "tool", t.Name, "name", ct.Name)
			continue
		}
		byName[ct.Name] = ct
		tools = append(tools, ct)
		if _, declared := s.cfg.RoomArg(t.Name); !declared {
			if h := roomHint(t.Name, t.InputSchema); h != "" {
				hints = append(hints, h)
			}
		}
	}
	if len(hints) > 0 {
		s.m.log.Warn("connector tools take a chat room not declared under rooms: the reachability rule does not check them",
			"server", s.cfg.Name, "tools", hints)
	}
	s.mu.Lock()
	s.tools, s.byName, s.roomHints = tools, byName, hints
	s.mu.Unlock()
	return nil
}

// coreTool declares a server's tool to Marlowe.
func (s *server) coreTool(t *mcp.Tool) (core.Tool, error) {
	schema, err := objectSchema(t.InputSchema)
	if err != nil {
		return core.Tool{}, err
	}
	override, _ := s.cfg.Override(t.Name)
	idem := t.Annotations != nil && t.Annotations.IdempotentHint
	name, remote := ToolName(s.cfg.Name, t.Name), t.Name
	ct := core.Tool{
		Name: name, Description: t.Description, Schema: schema,
		Consequence: Consequence(t.Annotations, override),
		Connector:   &core.ToolOrigin{Server: s.cfg.Name, Tool: remote, Definition: Definition(t), Idempotent: idem},
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			return s.call(ctx, name, remote, args, tc.Progress)
		},
	}
	if s.cfg.Identity == IdentityPerson {
		// Each call carries the requester's own sign-in (person.go).
		ct.ActsAsRequester = true
		ct.Run = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			return s.callAs(ctx, tc, name, remote, args)
		}
	}
	if arg, ok := s.cfg.RoomArg(remote); ok {
		postsToRoom(&ct, arg)
	}
	return ct, ct.Validate()
}

// postsToRoom makes ct a tool that posts into the room its argument arg
// names, on the requester's behalf: the room is a target, and the
// reachability rule (core.CheckReach) decides it before the gate asks
// anyone (Check) and again when the call runs (the requester may have left
// the room while a card waited). A refusal names no room.
func postsToRoom(ct *core.Tool, arg string) {
	ct.Targets = append(ct.Targets, arg)
	check := func(ctx context.Context, tc core.ToolContext, args json.RawMessage) error {
		var a map[string]any
		if err := json.Unmarshal(args, &a); err != nil {
			return fmt.Errorf("arguments: %w", err)
		}
		room, _ := a[arg].(string)
		if room = strings.TrimSpace(room); room == "" {
			return fmt.Errorf("argument %q must name a room (a channel id)", arg)
		}
		if err := core.CheckReach(ctx, tc.Surface, tc.Scope, tc.Actor.ID, room); err != nil {
			return fmt.Errorf("not posting there: %w", err)
		}
		return nil
	}
	ct.Check = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Consequence, error) {
		return "", check(ctx, tc, args)
	}
	run := ct.Run
	ct.Run = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
		if err := check(ctx, tc, args); err != nil {
			return core.Observation{}, err
		}
		return run(ctx, tc, args)
	}
}

// objectSchema is the tool's input schema as JSON, with "type": "object"
// filled in when a server left it out.
func objectSchema(in any) (json.RawMessage, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
		b, _ = json.Marshal(m)
	}
	return b, nil
}

// ErrDown is the error of a call to a server that is not connected.
var ErrDown = errors.New("connector is down")

// call sends one tools/call. It fails at once when the server is down;
// ctx's cancellation reaches the server as notifications/cancelled.
func (s *server) call(ctx context.Context, name, remote string, args json.RawMessage, progress func(core.Progress)) (core.Observation, error) {
	s.mu.Lock()
	conn, lastErr := s.conn, s.lastErr
	s.mu.Unlock()
	start := time.Now()
	outcome := "ok"
	why := ""
	defer func() { s.observed(ctx, remote, start, outcome, why) }()
	if conn == nil {
		outcome = "down"
		why = "it is starting"
		if lastErr != nil {
			why = lastErr.Error()
		}
		err := fmt.Errorf("%w: server %s is not connected (%s); it is being restarted, try again later", ErrDown, s.cfg.Name, why)
		_, span := s.startSpan(ctx, remote, nil, args) // a call that reached no server, as an HTTP client span of a refused connection
		s.endSpan(span, outcome, nil, core.Observation{}, err)
		return core.Observation{}, err
	}
	return s.callOn(ctx, conn, name, remote, args, progress, &outcome)
}

// observed reports a finished call to Observe and, when it failed (down,
// timeout, error), logs it with the call's context: under a traced run the
// line carries the run's trace and span ids. why (a down server's reason)
// is logged, the error's text is not: a server's refusal may quote the
// call's arguments.
func (s *server) observed(ctx context.Context, remote string, start time.Time, outcome, why string) {
	took := time.Since(start)
	if s.m.opts.Observe != nil {
		s.m.opts.Observe(s.cfg.Name, remote, took, outcome)
	}
	switch outcome {
	case "down", "timeout", "error":
		attrs := []any{"server", s.cfg.Name, "tool", remote, "outcome", outcome, "took", took}
		if why != "" {
			attrs = append(attrs, "why", why)
		}
		s.m.log.WarnContext(ctx, "connector call failed", attrs...)
	}
}

// callOn sends one tools/call on conn, setting *outcome, in an MCP
// client span (trace.go) whose trace context the request carries.
// With progress set, the call carries a progress token and the server's
// notifications/progress for it are passed on.
func (s *server) callOn(ctx context.Context, conn *connection, name, remote string, args json.RawMessage, progress func(core.Progress), outcome *string) (obs core.Observation, err error) {
	ctx, span := s.startSpan(ctx, remote, conn, args)
	var rpcErr error
	defer func() { s.endSpan(span, *outcome, rpcErr, obs, err) }()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	params := &mcp.CallToolParams{Name: remote, Arguments: args, Meta: traceMeta(ctx)}
	if progress != nil {
		tok, done := s.progress.open(progress)
		defer done()
		params.SetProgressToken(tok)
	}
	var res *mcp.CallToolResult
	res, rpcErr = conn.session.CallTool(cctx, params)
	switch {
	case rpcErr != nil && ctx.Err() != nil:
		*outcome = "cancelled"
		return core.Observation{}, fmt.Errorf("calling %s: %w", name, ctx.Err())
	case rpcErr != nil && cctx.Err() != nil:
		*outcome = "timeout"
		return core.Observation{}, fmt.Errorf("calling %s: no answer within %s (the server's timeout)", name, s.cfg.Timeout)
	case rpcErr != nil:
		*outcome = "error"
		return core.Observation{}, fmt.Errorf("calling %s: %w", name, explainAsk(rpcErr))
	}
	obs, err = observe(name, res, s.m.opts.ResultCap)
	if err != nil {
		*outcome = "tool-error"
	}
	return obs, err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tail keeps the last n lines written to it (a server's stderr), with
// the ${VAR} values of the server's config masked: a server that prints
// its token on failure must not put it in Marlowe's logs or doctor.
type tail struct {
	mu      sync.Mutex
	n       int
	buf     []string
	partial []byte
	mask    *strings.Replacer
}

func newTail(n int, secrets []string) *tail {
	t := &tail{n: n}
	if len(secrets) > 0 {
		// Longest first, so a secret containing another is masked whole.
		s := slices.Clone(secrets)
		slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
		pairs := make([]string, 0, 2*len(s))
		for _, v := range s {
			pairs = append(pairs, v, "[redacted]")
		}
		t.mask = strings.NewReplacer(pairs...)
	}
	return t
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			t.push(string(t.partial))
			t.partial = t.partial[:0]
			continue
		}
		if len(t.partial) < 1000 {
			t.partial = append(t.partial, b)
		}
	}
	return len(p), nil
}

func (t *tail) push(line string) {
	t.buf = append(t.buf, line)
	if len(t.buf) > t.n {
		t.buf = t.buf[len(t.buf)-t.n:]
	}
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.buf)
	if len(t.partial) > 0 {
		out = append(out, string(t.partial))
	}
	if t.mask != nil {
		for i, l := range out {
			out[i] = t.mask.Replace(l)
		}
	}
	return out
}
