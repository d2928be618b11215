package memory

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Defaults (ARCHITECTURE.md section 7; the seeds' retrieval budget).
const (
	DefaultFloor       = 0.35 // cosine similarity under which a dense hit is dropped
	DefaultMaxSnippets = 6    // injected per turn
	DefaultMaxChars    = 400  // per snippet
	DefaultPerQuery    = 3    // per recall query
	DefaultCandidates  = 20   // per cue, before fusion
	DefaultMaxTextLen  = 2000 // characters a memory may hold
	DefaultRRFK        = 60   // reciprocal rank fusion constant
	// DefaultDedupWindow matches the thread intent window: within it a
	// thread's transcript still carries what was recalled, so injecting it
	// again only costs tokens.
	DefaultDedupWindow = core.DefaultThreadWindow
)

// Options tunes recall. Zero fields take the defaults above.
type Options struct {
	// Floor is the initial similarity floor (0 means DefaultFloor; for no
	// floor at all call SetFloor(0)); change it at runtime with
	// Service.SetFloor.
	Floor       float64
	MaxSnippets int
	MaxChars    int
	PerQuery    int
	Candidates  int
	MaxTextLen  int
	RRFK        int
	DedupWindow time.Duration
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Floor <= 0 {
		o.Floor = DefaultFloor
	}
	def(&o.MaxSnippets, DefaultMaxSnippets)
	def(&o.MaxChars, DefaultMaxChars)
	def(&o.PerQuery, DefaultPerQuery)
	def(&o.Candidates, DefaultCandidates)
	def(&o.MaxTextLen, DefaultMaxTextLen)
	def(&o.RRFK, DefaultRRFK)
	if o.DedupWindow <= 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	o.PerQuery = min(o.PerQuery, o.MaxSnippets)
	o.Candidates = max(o.Candidates, o.PerQuery)
	return o
}

// Config wires a Service. Journal, Boundary and Index are required.
type Config struct {
	Journal  core.Journal
	Boundary *core.Boundary
	Index    Index
	// Embedder is optional: without one (or while it fails) recall is
	// lexical only and says so (Result.Degraded).
	Embedder core.Embedder
	Options  Options
	// DefaultPolicy is the policy of a channel that has no policy.changed
	// yet (the engine's Config.DefaultPolicy): Link journals a whole
	// policy, so it must start from what the channel has in effect.
	DefaultPolicy core.Policy
	Logger        *slog.Logger
}

// Service is per-channel memory: the harness side of remember, recall,
// forget and delete, journaling every change and keeping the Index in step.
// It is safe for concurrent use.
type Service struct {
	j      core.Journal
	b      *core.Boundary
	ix     Index
	emb    core.Embedder
	opt    Options
	policy core.Policy
	log    *slog.Logger

	floor   atomic.Uint64 // math.Float64bits
	metrics *metrics
	dedup   *dedup
	// origins serialises remembers of one (channel, origin) in this process,
	// so a re-executed tool call racing its first execution stores once.
	origins [64]sync.Mutex
	// texts serialises remembers of one (channel, text): a lock taken
	// inside an origin lock, never the other way round, so the two stripe
	// sets cannot deadlock.
	texts [64]sync.Mutex
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Journal == nil:
		return nil, errors.New("memory: nil journal")
	case cfg.Boundary == nil:
		return nil, errors.New("memory: nil boundary")
	case cfg.Index == nil:
		return nil, errors.New("memory: nil index")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	opt := cfg.Options.withDefaults()
	s := &Service{
		j: cfg.Journal, b: cfg.Boundary, ix: cfg.Index, emb: cfg.Embedder, opt: opt,
		policy: cfg.DefaultPolicy, log: log.With("component", "memory"),
		metrics: newMetrics(), dedup: newDedup(opt.DedupWindow),
	}
	if err := checkFloor(opt.Floor); err != nil {
		return nil, err
	}
	s.floor.Store(math.Float64bits(opt.Floor))
	return s, nil
}

// For returns the handle bound to channel ch: the only way to reach memory.
// An invalid key yields a handle whose every call fails.
func (s *Service) For(ch core.ChannelKey) *Channel {
	sc, err := core.ParseChannelKey(string(ch))
	if err == nil && sc.Key() != ch {
		err = fmt.Errorf("channel key %q is not canonical", ch)
	}
	return &Channel{s: s, ch: ch, scope: sc, err: err}
}

// Memory is the function engine.Config.Memory wants.
func (s *Service) Memory(ch core.ChannelKey) core.ChannelMemory { return s.For(ch) }

// SetFloor changes the similarity floor for every later recall, without a
// restart. f must be within [0, 1].
func (s *Service) SetFloor(f float64) error {
	if err := checkFloor(f); err != nil {
		return err
	}
	old := math.Float64frombits(s.floor.Swap(math.Float64bits(f)))
	s.log.Info("memory similarity floor changed", "from", old, "to", f)
	return nil
}

func checkFloor(f float64) error {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return fmt.Errorf("memory: similarity floor %v: want a value in [0, 1]", f)
	}
	return nil
}

// Floor is the similarity floor in effect.
func (s *Service) Floor() float64 { return math.Float64frombits(s.floor.Load()) }

// Options returns the options in effect (defaults filled in).
func (s *Service) Options() Options { return s.opt }

// Stats returns a snapshot of the service's metrics.
func (s *Service) Stats() Stats { return s.metrics.snapshot() }

// Degraded reports whether recall is lexical only by configuration (no
// embedder). A failing embedder degrades single recalls; see Result.
func (s *Service) Degraded() bool { return s.emb == nil }

func (s *Service) originLock(ch core.ChannelKey, origin string) *sync.Mutex {
	return &s.origins[stripe(ch, origin, len(s.origins))]
}

// textLock is the lock of remembers of text in ch (see texts).
func (s *Service) textLock(ch core.ChannelKey, text string) *sync.Mutex {
	return &s.texts[stripe(ch, text, len(s.texts))]
}

func stripe(ch core.ChannelKey, key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ch))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// draft stamps a command for by: a run (agent), a verified person (human)
// or the system (operator CLI, scheduler; the default).
func (s *Service) draft(by core.Actor, scope core.Scope, m core.Meta, p core.Payload) (core.Draft, error) {
	switch by.Type {
	case core.ActorAgent:
		return s.b.Agent(by.ID, scope, m, p)
	case core.ActorHuman:
		return s.b.Human(core.Person{ID: by.ID}, scope, m, p)
	case core.ActorSystem, "":
		id := by.ID
		if id == "" {
			id = systemActor
		}
		return s.b.System(id, scope, m, p)
	}
	return core.Draft{}, fmt.Errorf("memory: unknown actor type %q", by.Type)
}

// systemActor is the actor id of memory commands with nobody better to
// attribute them to (a forget through the engine's handle, which carries no
// run).
const systemActor = "memory"

// dedup remembers which memories each thread was given, so a turn does not
// pay again for a memory its transcript already holds. It is process-local
// and best effort: a replica that did not serve the earlier recall injects
// once more, which costs tokens, not correctness.
type dedup struct {
	window time.Duration
	mu     sync.Mutex
	seen   map[dedupKey]time.Time
	swept  time.Time
}

type dedupKey struct {
	ch     core.ChannelKey
	thread string
	id     string
}

func newDedup(window time.Duration) *dedup {
	return &dedup{window: window, seen: map[dedupKey]time.Time{}}
}

// recent reports whether id was injected in the thread within the window.
func (d *dedup) recent(ch core.ChannelKey, thread, id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.seen[dedupKey{ch, thread, id}]
	return ok && now.Sub(at) < d.window
}

// mark records ids as injected in the thread at now, sweeping expired
// entries at most once a minute so the map stays bounded by the recall rate.
func (d *dedup) mark(ch core.ChannelKey, thread string, ids []string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		d.seen[dedupKey{ch, thread, id}] = now
	}
	if now.Sub(d.swept) < time.Minute {
		return
	}
	d.swept = now
	for k, at := range d.seen {
		if now.Sub(at) >= d.window {
			delete(d.seen, k)
		}
	}
}
