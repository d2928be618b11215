package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Defaults.
const (
	DefaultGrace = time.Hour
	DefaultTick  = 10 * time.Second
	// Caps on routines (MARLOWE_ROUTINE_MAX_PER_CHANNEL,
	// MARLOWE_ROUTINE_MAX_PER_OWNER).
	DefaultMaxPerChannel = 20
	DefaultMaxPerOwner   = 10
	// maxSlotScan bounds how many missed slots one pass walks (a year of
	// downtime under @every 5m is about 105k): beyond it the count is a floor.
	maxSlotScan = 200_000
	// maxCoalesced bounds how many earlier missed slots a catch-up firing
	// journals as skipped (coalesced); the catch-up's missed counts them all.
	maxCoalesced = 100
)

// Engine is what the scheduler needs of engine.Engine: posting a digest
// through the engine's post path, starting a firing's unattended run when a
// model answers, the channel's daily budget, a card in a routine owner's
// inbox, and who administers a channel.
type Engine interface {
	PostRoutine(ctx context.Context, p core.DigestPost) (core.MessageRef, error)
	HasModel() bool
	StartUnattended(ctx context.Context, u core.UnattendedRun) (string, error)
	DailyBudget(ctx context.Context, sc core.Scope) (spent, limit int, err error)
	NotifyOwner(ctx context.Context, n core.OwnerNotice) error
	IsAdmin(ctx context.Context, sc core.Scope, p core.Person) bool
}

// Config wires a Scheduler. Journal and Boundary are required.
type Config struct {
	Journal  core.Journal
	Boundary *core.Boundary
	// Clock is what slots are judged by (default: the boundary clock).
	Clock func() time.Time
	// MinInterval is the shortest schedule accepted (default 5m).
	MinInterval time.Duration
	// Grace is how late a missed slot may still fire (default 1h); later
	// ones are journaled as skipped.
	Grace time.Duration
	// Tick is how often Run looks for due slots (default 10s).
	Tick time.Duration
	// MaxPerChannel caps a channel's routines (default 20) and MaxPerOwner
	// one person's, across the channels of their platform (default 10):
	// `routine add` and schedule_routine proposals past either are refused.
	// Paused routines and proposals waiting for their Arm click count;
	// deleted and discarded ones do not.
	MaxPerChannel int
	MaxPerOwner   int
	Logger        *slog.Logger
	// Lease, when set, elects the one replica that runs passes (the
	// database's lease table, replica.Elector); nil means this process is the
	// only scheduler.
	Lease Lease
}

// Lease is a single-holder lease (replica.Elector): Acquire blocks until
// the caller holds name; the returned context ends when the lease is lost.
type Lease interface {
	Acquire(ctx context.Context, name string) (held context.Context, release func(), err error)
}

// leaseName is the lease every replica's scheduler competes for.
const leaseName = "scheduler"

// Scheduler fires routines. Without a Lease only one process may run it;
// with one, passes run only while the lease is held. The lease is not what
// makes a slot fire once: a firing's command id is keyed by (routine, slot),
// so of two schedulers that both think they hold the lease (a stalled
// holder and its successor) the journal's UNIQUE (id) lets one journal it,
// and only that one posts or starts its run at once; a firing left
// undelivered is retried later, flagged so the surface checks the platform
// for its key before posting again.
type Scheduler struct {
	cfg Config
	// mu serialises passes and routine commands, so one process never
	// decides a slot twice.
	mu  sync.Mutex
	eng Engine
	// tails holds what each channel's passes have folded (tail.go): a pass
	// reads only the commands after it. Guarded by mu.
	tails map[core.ChannelKey]*chanTail
	// noticed holds the owner notices this process has sent (NotifyOwner
	// itself dedups across processes by the DM's journal). Guarded by mu.
	noticed map[string]bool
}

// New validates cfg.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Journal == nil || cfg.Boundary == nil {
		return nil, errors.New("scheduler: journal and boundary are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Boundary.Now
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.MaxPerChannel <= 0 {
		cfg.MaxPerChannel = DefaultMaxPerChannel
	}
	if cfg.MaxPerOwner <= 0 {
		cfg.MaxPerOwner = DefaultMaxPerOwner
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, tails: map[core.ChannelKey]*chanTail{}, noticed: map[string]bool{}}, nil
}

// Bind gives the scheduler the engine it posts through. The engine is built
// after the tool registry that holds the scheduler's tool, so this comes
// second; call it before Run or any routine command.
func (s *Scheduler) Bind(e Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng = e
}

// Run passes over every channel each Tick until ctx ends; with a Lease,
// only while holding it.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.cfg.Lease == nil {
		return s.loop(ctx)
	}
	for ctx.Err() == nil {
		held, release, err := s.cfg.Lease.Acquire(ctx, leaseName)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.cfg.Logger.Warn("routine lease unavailable; retrying", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(s.cfg.Tick):
			}
			continue
		}
		s.cfg.Logger.Info("routine lease held: this replica fires routines")
		_ = s.loop(held)
		release()
	}
	return nil
}

func (s *Scheduler) loop(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("routine pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick is one pass: every armed routine's due slot is fired once (within
// the grace window) or journaled as skipped, and digests whose post is not
// journaled yet are posted again with the same idempotency key.
func (s *Scheduler) Tick(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	chs, err := s.cfg.Journal.Channels(ctx)
	if err != nil {
		return fmt.Errorf("routine pass: channels: %w", err)
	}
	var errs []error
	for _, ch := range chs {
		if err := s.tickChannel(ctx, ch); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Scheduler) tickChannel(ctx context.Context, ch core.ChannelKey) error {
	tail, err := s.catchUp(ctx, ch)
	if err != nil {
		return err
	}
	if tail.fold == nil {
		return nil // no routine here
	}
	routines := tail.routinesOf()
	now := s.cfg.Clock().UTC()
	var errs []error
	for _, r := range sorted(routines) {
		if r.Deleted {
			continue
		}
		if err := s.tend(ctx, tail, r, now); err != nil {
			errs = append(errs, err)
		}
		if !r.Armed {
			continue
		}
		sched, err := ParseSpec(r.Spec, r.TZ, 0)
		if err != nil {
			s.cfg.Logger.Warn("routine has a schedule that no longer parses", "routine", r.ID, "error", err)
			continue
		}
		start := r.CreatedAt
		if r.Cursor.After(start) {
			start = r.Cursor
		}
		if r.ArmedAt.After(start) {
			start = r.ArmedAt // slots while disarmed (a proposal, a pause) never fire
		}
		if r.RescheduledAt.After(start) {
			start = r.RescheduledAt // the new schedule's slots before the edit never existed
		}
		var last time.Time
		var earlier []time.Time // missed slots before last, within grace (the newest maxCoalesced)
		n := 0
		for t := sched.Next(start); !t.IsZero() && !t.After(now) && n < maxSlotScan; t = sched.Next(t) {
			if n > 0 && now.Sub(last) <= s.cfg.Grace {
				if earlier = append(earlier, last); len(earlier) > maxCoalesced {
					earlier = earlier[1:]
				}
			}
			last, n = t, n+1
		}
		if n == 0 || r.Fired(last) {
			continue
		}
		if prev := lastScheduled(r); prev != nil && last.Sub(prev.Slot) < s.cfg.MinInterval {
			// The minimum interval holds at firing time, whatever the spec
			// says (a DST change, a spec accepted under a shorter minimum):
			// this slot waits; a later one fires once it is far enough.
			continue
		}
		p := &core.RoutineFired{RoutineID: r.ID, Slot: last, Outcome: OutcomeFired, Missed: n - 1}
		if late := now.Sub(last); late > s.cfg.Grace {
			p.Outcome = OutcomeSkipped
			p.Reason = fmt.Sprintf("missed by %s, more than the %s grace window", late.Round(time.Second), s.cfg.Grace)
		} else if why := s.overBudget(ctx, r); why != "" {
			p.Outcome, p.Reason = OutcomeSkipped, why
		} else if why := s.ownerCannotRead(ctx, r); why != "" {
			p.Outcome, p.Reason = OutcomeSkipped, why
		}
		if p.Outcome == OutcomeFired {
			// Missed slots coalesce: one catch-up firing for the latest, and
			// the earlier ones within grace journaled first as skipped
			// (coalesced), under the ids their own firings would have had, so
			// no scheduler (a stalled one, a restarted one) fires them later.
			if err := s.coalesce(ctx, r, earlier, last); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		f, err := s.fire(ctx, r, p)
		if errors.Is(err, errLostSlot) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if f.Outcome == OutcomeSkipped {
			s.cfg.Logger.WarnContext(ctx, "routine slot skipped", "routine", r.ID, "slot", last, "reason", p.Reason)
			if err := s.noticeSkip(ctx, r, f); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// The digest covers the journal up to the firing.
		digest, err := s.tailDigest(ctx, tail, r, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := s.perform(ctx, r, f, digest, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lastScheduled is r's latest scheduled slot that fired (not skipped, not
// manual), nil when none has.
func lastScheduled(r *Routine) *Firing {
	var out *Firing
	for _, f := range r.Firings {
		if f.Outcome == OutcomeFired && (out == nil || f.Slot.After(out.Slot)) {
			out = f
		}
	}
	return out
}

// coalesce journals each of r's missed slots in earlier (those before the
// catch-up slot, within grace) as skipped and coalesced into the catch-up
// firing of slot. A slot another scheduler journaled first is passed over.
func (s *Scheduler) coalesce(ctx context.Context, r *Routine, earlier []time.Time, slot time.Time) error {
	for _, t := range earlier {
		if r.Fired(t) {
			continue
		}
		p := &core.RoutineFired{RoutineID: r.ID, Slot: t, Outcome: OutcomeSkipped, Coalesced: true,
			Reason: "coalesced: only the latest due slot fires, and the catch-up firing of " + slotIn(slot, r.TZ) + " covers this one"}
		if _, err := s.fire(ctx, r, p); err != nil && !errors.Is(err, errLostSlot) {
			return err
		}
	}
	return nil
}
