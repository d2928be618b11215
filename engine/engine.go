package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/replica"
)

// Budgets bound what runs may spend. Zero fields take the defaults.
type Budgets struct {
	MaxSteps  int           // model calls per run (default 12)
	MaxTokens int           // tokens per run (default 60,000)
	MaxWall   time.Duration // working time per run, parked time excluded (default 5 min)
	// DailyTokens is the per-channel, per-UTC-day token budget for channels
	// whose policy sets none (0 = unlimited).
	DailyTokens int
}

// DefaultMaxInputChars is how much of one message a model sees by default.
const DefaultMaxInputChars = 8000

// Default budgets.
const (
	DefaultMaxSteps  = 12
	DefaultMaxTokens = 60_000
	DefaultMaxWall   = 5 * time.Minute
)

func (b Budgets) withDefaults() Budgets {
	if b.MaxSteps <= 0 {
		b.MaxSteps = DefaultMaxSteps
	}
	if b.MaxTokens <= 0 {
		b.MaxTokens = DefaultMaxTokens
	}
	if b.MaxWall <= 0 {
		b.MaxWall = DefaultMaxWall
	}
	return b
}

// Config wires the run loop. Journal, Boundary, Surfaces, Router and
// CardKey are required.
type Config struct {
	Journal  core.Journal
	Boundary *core.Boundary
	// Model answers runs; nil means offline: only the deterministic command
	// grammar (help, memory, status, cancel, policy, routines, inbox…) is served.
	Model core.Model
	// Tools is the tool registry (nil: no tools).
	Tools *gate.Registry
	// Surfaces maps a platform name (Scope.Platform) to its surface.
	Surfaces map[string]core.Surface
	Router   core.Router
	// PostObserver hears about every bot post (intent windows); may be nil.
	PostObserver core.PostObserver
	// Memory returns the memory handle of one channel; may be nil.
	Memory func(core.ChannelKey) core.ChannelMemory
	// Attachments reads the files people share (attachments.go); nil: the
	// model is told of no file.
	Attachments core.AttachmentReader
	// Blobs keeps the images shown to the model, by hash; nil: images are
	// not shown (they could not be shown again after a restart).
	Blobs core.BlobStore
	// Exports keeps `export my data` archives until their link expires
	// (exportfile.go); nil: GET /export builds the export anew each time.
	Exports core.ExportStore

	Logger *slog.Logger
	// Clock is the time budgets and expiries are judged by (default: the
	// boundary clock).
	Clock func() time.Time
	// ExportURL is the bot's HTTP address as people reach it ("" = none):
	// `export my data` links to ExportURL/export on surfaces that take no
	// files (export.go).
	ExportURL string
	// Connections, when set, is the per-person sign-in service
	// (`connections`, `disconnect <server>`, `forget me`; connections.go).
	Connections core.Connections
	// CardKey signs card button tokens (HMAC-SHA256), at least 16 bytes.
	// It must be stable across restarts or pending cards stop verifying.
	CardKey []byte
	Budgets Budgets
	// DefaultPolicy applies to channels that have no policy.changed yet.
	DefaultPolicy core.Policy
	// ApprovalTTL is how long a card stays answerable (default 24 h).
	ApprovalTTL time.Duration
	// ModelRetries is how many times a transient model failure is retried
	// within one step (default 2); RetryBackoff the first wait (default 1 s,
	// doubled each time, or the provider's Retry-After when shorter than 30 s).
	ModelRetries int
	RetryBackoff time.Duration
	// OutageNotice is how long a journal outage lasts before a run shows
	// it is blocked on it (default DefaultOutageNotice).
	OutageNotice time.Duration
	// ToolTimeout bounds one tool call (default 60 s).
	ToolTimeout time.Duration
	// Name is how the bot introduces itself to the model (default "Marlowe").
	Name string
	// MaxInputChars caps how much of any one person's message a model sees
	// (default DefaultMaxInputChars); the journal keeps the message whole.
	MaxInputChars int
	// ChecklistDelay is how long a run may take to answer before it posts
	// its checklist (default 3 s); a run that does tool work posts it at
	// once, one that answers in one step sooner posts only its answer.
	ChecklistDelay time.Duration
	// Leases, when set, is the lease table replicas share: this engine
	// drives only the channels whose lease it holds (ownership.go, package replica).
	// Nil: it drives every channel (embedded mode, one process).
	Leases core.Leases
	// Replica names this process in the lease table (default host-pid; a
	// random suffix is always added); LeaseTTL is how long its leases outlive its last
	// renewal (default DefaultLeaseTTL).
	Replica  string
	LeaseTTL time.Duration
	// ChannelIdle is how long a channel's cache (its fold) stays in memory
	// untouched while it has no live runs, pending approvals or queued work
	// (default DefaultChannelIdle; negative: never evicted). An evicted
	// channel is folded again from the journal when next touched.
	ChannelIdle time.Duration
	// Operators administer every channel of their platform (MARLOWE_ADMINS).
	// With none, a channel's admins come from the platform and from policy
	// set by an existing admin; with no admin known, policy is read-only.
	Operators []core.Operator
	// Metrics hears about run ends and model calls (nil: not counted).
	Metrics core.RunMetrics
	// CheckpointEvery is how many commands a channel grows by before its
	// owner appends a fold.checkpoint (default DefaultCheckpointEvery;
	// negative: never). Loading a channel restores its latest checkpoint
	// and folds only what follows (checkpoint.go).
	CheckpointEvery int
	// Prices estimate what model calls cost (MARLOWE_MODEL_PRICES): spend
	// in metrics and `status`, and the daily budget set as money (spend.go).
	Prices core.Prices
	// Tracing makes the runs' OpenTelemetry spans (trace.go; zero: none).
	Tracing Tracing
	// Verifier checks a checkpoint's signature before it is restored
	// (nil: the journal's own, when it offers one; with neither, channels
	// are always folded whole and no checkpoint is taken).
	Verifier *core.Verifier
}

// Engine is the run loop: ingress (Deliver), one serial consumer per thread
// (the mailbox), the model/tool interpreter, the gate, approvals and budgets.
type Engine struct {
	cfg      Config
	j        core.Journal
	b        *core.Boundary
	model    core.Model
	offline  bool
	tools    *gate.Registry
	surfaces map[string]core.Surface
	log      *slog.Logger
	now      func() time.Time
	budgets  Budgets
	tr       trace.Tracer // spans (trace.go); traced: they go somewhere
	traced   bool
	so       spanOpts // what every span of a kind is started with, made once

	chMu     sync.Mutex
	channels map[core.ChannelKey]*chanView
	evicting bool // the eviction goroutine runs (guarded by mu)
	sweeping bool // the export sweep runs (guarded by mu)

	retainCursors                   // retention passes' per-channel cursors (retention.go)
	ckpt          *checkpointConfig // shared by every chanView (checkpoint.go)

	// own is the channel leases this replica holds.
	own *replica.Ownership // nil in embedded mode: the engine owns every channel
	// unrun holds the tool calls mayAct kept from running (actable.go).
	unrunMu sync.Mutex
	unrun   map[string]bool
	// heldElsewhere: channels a claim before journaling found held by
	// another replica, and until when not to ask again (ownership.go).
	elseMu        sync.Mutex
	heldElsewhere map[core.ChannelKey]time.Time

	// recalls holds automatic recalls not yet journaled (see keepRecall).
	recallMu sync.Mutex
	recalls  map[string]core.TurnRecall

	mu       sync.Mutex
	closed   bool
	runCtx   context.Context
	cancel   context.CancelFunc
	stopLink func() bool
	threads  map[threadKey]*mailbox
	expiries map[string]*time.Timer             // approval id → deadline timer
	inflight map[string]context.CancelCauseFunc // run id → its model call (see interrupt)
	wg       sync.WaitGroup
	idle     *sync.Cond
	busy     int
	drain    drainState // see drain.go
}

type threadKey struct {
	ch     core.ChannelKey
	thread string
}

// New validates cfg and returns an engine. It starts nothing: call
// Start to resume unfinished runs, then let surfaces call Deliver.
func New(cfg Config) (*Engine, error) {
	var errs []error
	if cfg.Journal == nil {
		errs = append(errs, errors.New("journal is required"))
	}
	if cfg.Boundary == nil {
		errs = append(errs, errors.New("boundary is required"))
	}
	if len(cfg.Surfaces) == 0 {
		errs = append(errs, errors.New("at least one surface is required"))
	}
	if cfg.Router == nil {
		errs = append(errs, errors.New("router is required (the intent filter): an unfiltered engine would record every message"))
	}
	if len(cfg.CardKey) < 16 {
		errs = append(errs, errors.New("card key must be at least 16 bytes"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("new engine: %w", errors.Join(errs...))
	}
	e := &Engine{
		cfg: cfg, j: cfg.Journal, b: cfg.Boundary, model: cfg.Model, tools: cfg.Tools,
		surfaces: maps.Clone(cfg.Surfaces), log: cfg.Logger, now: cfg.Clock,
		budgets: cfg.Budgets.withDefaults(), channels: map[core.ChannelKey]*chanView{},
		threads: map[threadKey]*mailbox{}, unrun: map[string]bool{}, heldElsewhere: map[core.ChannelKey]time.Time{},
	}
	if e.model == nil {
		e.offline = true
	}
	e.tr, e.traced = newTracer(cfg.Tracing)
	e.so = newSpanOpts(cfg.Tracing)
	if e.tools == nil {
		e.tools, _ = gate.NewRegistry()
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = e.b.Now
	}
	if e.cfg.ApprovalTTL <= 0 {
		e.cfg.ApprovalTTL = DefaultApprovalTTL
	}
	if e.cfg.MaxInputChars <= 0 {
		e.cfg.MaxInputChars = DefaultMaxInputChars
	}
	if e.cfg.ModelRetries < 0 {
		e.cfg.ModelRetries = 0
	} else if e.cfg.ModelRetries == 0 {
		e.cfg.ModelRetries = 2
	}
	if e.cfg.OutageNotice <= 0 {
		e.cfg.OutageNotice = DefaultOutageNotice
	}
	if e.cfg.RetryBackoff <= 0 {
		e.cfg.RetryBackoff = time.Second
	}
	if e.cfg.ToolTimeout <= 0 {
		e.cfg.ToolTimeout = time.Minute
	}
	if e.cfg.ChecklistDelay <= 0 {
		e.cfg.ChecklistDelay = DefaultChecklistDelay
	}
	if e.cfg.Name == "" {
		e.cfg.Name = "Marlowe"
	}
	if cfg.Leases != nil {
		e.own = replica.NewOwnership(cfg.Leases, cfg.Replica, cfg.LeaseTTL)
	}
	e.ckpt = newCheckpointConfig(cfg, e.log)
	e.idle = sync.NewCond(&e.mu)
	e.runCtx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Start resumes the journal's unfinished runs: runs that were working are
// driven on from their last journaled step; parked runs (waiting for
// approval, blocked) get their card or notice re-issued if it was lost and
// stay parked; overdue approvals expire. Cancelling ctx stops the engine as
// Close does (without waiting).
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errors.New("engine start: engine is closed")
	}
	if e.stopLink == nil {
		e.stopLink = context.AfterFunc(ctx, e.cancel)
	}
	e.mu.Unlock()
	// Only the channels the journal's tail shows unfinished work in are
	// folded: the others load on first touch (docs/architecture.md,
	// "Start-up and eviction").
	chs, err := e.channelsWithWork(ctx)
	if err != nil {
		return fmt.Errorf("engine start: %w", err)
	}
	resumed, owned := 0, 0
	for _, ch := range chs {
		ok, _, err := e.claim(ctx, ch)
		if err != nil {
			return fmt.Errorf("engine start: claim %s: %w", ch, err)
		}
		if !ok {
			continue // another replica drives it
		}
		owned++
		n, err := e.resumeChannel(ctx, ch)
		if err != nil {
			return fmt.Errorf("engine start: resume %s: %w", ch, err)
		}
		resumed += n
	}
	if e.own != nil {
		e.mu.Lock()
		if !e.closed {
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.keepLeases(e.runCtx)
			}()
		}
		e.mu.Unlock()
	}
	e.startEviction()
	e.startExportSweep()
	attrs := []any{"channels_with_work", len(chs), "owned", owned, "unfinished_runs", resumed}
	if id := e.Replica(); id != "" {
		attrs = append(attrs, "replica", id)
	}
	e.log.InfoContext(ctx, "engine started", attrs...)
	return nil
}

// resumeChannel picks up what ch left unfinished, from the journal: runs
// that were working are driven on from their last journaled step; parked
// runs get their card or notice re-issued if it was lost and stay parked;
// overdue approvals expire, pending ones get their deadline timer. Callers
// own ch. It returns how many runs it queued.
func (e *Engine) resumeChannel(ctx context.Context, ch core.ChannelKey) (int, error) {
	v := e.view(ch)
	type pick struct {
		key threadKey
		run string
	}
	var picks []pick
	var overdue, waiting []*fold.Approval
	now := e.now()
	// withFresh: a view loaded while another replica owned ch is stale.
	if err := v.withFresh(ctx, 0, func() {
		for _, r := range v.fold.Runs() {
			if r.Status.Terminal() && r.EndNotice == "" {
				continue
			}
			picks = append(picks, pick{threadKey{ch, r.Thread}, r.ID})
		}
		for _, a := range v.fold.Approvals() {
			if a.Pending() && !now.Before(a.ExpiresAt) {
				overdue = append(overdue, a)
			} else if a.Pending() {
				waiting = append(waiting, a)
			}
		}
	}); err != nil {
		return 0, err
	}
	fctx := ctx
	if f, ok := e.owns(ch); ok {
		fctx = replica.WithFence(ctx, f)
	}
	for _, a := range overdue {
		if err := e.expire(fctx, v, a.ID); err != nil {
			return 0, err
		}
	}
	for _, a := range waiting {
		e.armExpiry(ch, a.Scope.Thread, a.ID, a.ExpiresAt)
	}
	for _, p := range picks {
		e.enqueue(p.key, job{run: p.run, resume: true})
	}
	return len(picks), nil
}

// Close stops the engine: in-flight runs are cancelled at their next step
// (they resume from the journal at the next Start) and Close waits for every
// goroutine the engine started.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.stopExpiriesLocked()
	if e.stopLink != nil {
		e.stopLink()
	}
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	// Every drive has stopped: hand the channels over now rather than
	// after the TTL.
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.releaseLeases(rctx)
	return nil
}

// Wait blocks until every goroutine the engine started has exited (after
// Close, or after the context given to Start ends).
func (e *Engine) Wait() { e.wg.Wait() }

// WaitIdle blocks until no thread has work queued or running, or ctx ends.
// Tests and graceful shutdown use it to let in-flight runs finish.
func (e *Engine) WaitIdle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.idle.Broadcast()
	})
	defer stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.busy > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.idle.Wait()
	}
	return nil
}

// channel returns the loaded cache of ch.
func (e *Engine) channel(ctx context.Context, ch core.ChannelKey) (*chanView, error) {
	v := e.view(ch)
	if err := v.with(ctx, func() {}); err != nil {
		return nil, err
	}
	return v, nil
}

// view returns ch's cache, folded or not (its next locked use folds it),
// and marks it touched.
func (e *Engine) view(ch core.ChannelKey) *chanView {
	e.chMu.Lock()
	defer e.chMu.Unlock()
	v := e.channels[ch]
	if v == nil {
		v = e.newViewLocked(ch)
	}
	v.touched = e.now()
	return v
}

// newViewLocked makes ch's view and files it in e.channels. Callers hold
// e.chMu.
func (e *Engine) newViewLocked(ch core.ChannelKey) *chanView {
	v := newChanView(ch, e.j)
	v.ck.cfg = e.ckpt
	v.tr, v.traced = e.tr, e.traced
	if m := e.ops(); m != nil {
		v.appendFailed = m.JournalAppendFailed
	}
	e.channels[ch] = v
	return v
}

func (e *Engine) surface(platform string) (core.Surface, error) {
	s, ok := e.surfaces[platform]
	if !ok {
		return nil, fmt.Errorf("no surface for platform %q", platform)
	}
	return s, nil
}

// policyLocked returns the channel's effective policy. Callers hold v.mu.
func (e *Engine) policyLocked(v *chanView) core.Policy {
	if p, set := v.fold.Policy(); set {
		return p
	}
	return e.cfg.DefaultPolicy
}

// driveAttempts bounds how often one job retries a drive that failed.
const driveAttempts = 3

// job is one unit of a thread's mailbox.
type job struct {
	run      string // drive this run
	resume   bool   // first drive after a restart: re-issue the last checklist edit
	notice   *notice
	expire   string          // an approval whose deadline passed
	expireCh core.ChannelKey // its channel
	report   *reportShow
	proposal *proposalShow
}

// anyReplica says j is not the channel owner's to do: a reply to a click,
// or a DM card edit, done by whichever replica took the click.
func (j job) anyReplica() bool { return j.notice != nil || j.report != nil || j.proposal != nil }

// notice is a reply that is not part of a run's loop (a refused click).
type notice struct {
	key   string
	scope core.Scope
	text  string
	run   string
	cause string // command that requested it; "" when nothing was journaled
	// to, when set, makes the notice ephemeral: only this person sees it,
	// and nothing is posted where a surface cannot do that.
	to string
	// card, when set, is posted with the text (never ephemeral).
	card *core.Card
	// onlyPrivate: when the private post fails, post nothing. The answer
	// to a click on a button with no record is not for the channel (the
	// click itself was acknowledged).
	onlyPrivate bool
}

// mailbox is one thread's queue and its single consumer. No two goroutines
// ever drive runs of the same thread: that is what keeps folds in a thread
// from interleaving.
type mailbox struct {
	key   threadKey
	queue []job
}

// enqueue hands a job to the thread's consumer, starting one if none runs.
func (e *Engine) enqueue(k threadKey, j job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.runCtx.Err() != nil {
		return // the journal has it; the next Start picks it up
	}
	if !j.anyReplica() {
		if _, ok := e.owns(k.ch); !ok {
			e.claimThenLocked(k, j)
			return
		}
	}
	m := e.threads[k]
	if m == nil {
		m = &mailbox{key: k}
		e.threads[k] = m
		e.busy++
		e.wg.Add(1)
		go e.consume(m)
	}
	if j.run != "" {
		for i, q := range m.queue {
			if q.run == j.run && q.notice == nil {
				// Already queued: one drive sees everything journaled so
				// far, resumed if either job says so (a lease taken again
				// since: another replica may have posted for the run).
				m.queue[i].resume = q.resume || j.resume
				return
			}
		}
	}
	m.queue = append(m.queue, j)
}

func (e *Engine) consume(m *mailbox) {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		if len(m.queue) == 0 || e.runCtx.Err() != nil {
			delete(e.threads, m.key)
			e.busy--
			if e.busy == 0 {
				e.idle.Broadcast()
			}
			e.mu.Unlock()
			return
		}
		j := m.queue[0]
		m.queue = m.queue[1:]
		e.mu.Unlock()
		ctx := e.runCtx
		if f, ok := e.owns(m.key.ch); ok || j.anyReplica() {
			e.handle(replica.WithFence(ctx, f), j)
		} // else handed over: the new owner resumes from the journal
	}
}

func (e *Engine) handle(ctx context.Context, j job) {
	switch {
	case j.notice != nil:
		if err := e.postNotice(ctx, j.notice); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "post notice failed", "run", j.notice.run, "error", err)
		}
	case j.proposal != nil:
		if err := e.showProposal(ctx, j.proposal); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "edit a decided proposal card failed", "routine", j.proposal.rid, "error", err)
		}
	case j.report != nil:
		if err := e.showReport(ctx, j.report); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "show a dismissed report failed", "report", j.report.id, "error", err)
		}
	case j.expire != "":
		if err := e.expireDue(ctx, j.expireCh, j.expire); err != nil && ctx.Err() == nil {
			e.log.ErrorContext(ctx, "approval expiry failed", "approval", j.expire, "error", err)
		}
	case j.run != "":
		// A failed drive (platform or store trouble) is retried: every
		// drive starts again from the journal, so a retry repeats nothing
		// that was recorded and re-issues unrecorded posts with their keys.
		e.driveThroughOutages(ctx, j.run, j.resume)
	}
}
