package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/oklog/ulid/v2"
)

// Tool is the routine tool the command grammar calls. It acts only on a
// routine command that a person typed in the run, word for word, read back
// from the signed journal: a model calling it cannot arm, pause or delete
// anything the person did not ask for, and the command's author (not the
// run) is the actor of routine.created / routine.changed.
func (s *Scheduler) Tool() core.Tool {
	return core.Tool{
		Name: chatcommand.RoutineToolName,
		Description: "Carry out a routine command exactly as the person typed it in this conversation " +
			"(routine add <spec> [tz <zone>]: <instruction> | routines | routine pause|resume|delete|run <id> | " +
			"routine edit <id> [<spec>] [tz <zone>][: <instruction>]).",
		Schema:      json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the person's routine command, verbatim"}},"required":["text"],"additionalProperties":false}`),
		Consequence: core.Write,
		Check:       s.checkTool,
		Run:         s.runTool,
	}
}

// parseTool reads the routine tool's arguments: the command and its text.
// A command that will not parse, or whose schedule cannot be accepted, is
// an error here, before the gate asks anyone (checkTool).
func (s *Scheduler) parseTool(raw json.RawMessage) (chatcommand.RoutineCommand, string, error) {
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return chatcommand.RoutineCommand{}, "", fmt.Errorf("routine: %w", err)
	}
	text := strings.TrimSpace(args.Text)
	cmd, ok := chatcommand.ParseRoutine(text)
	if !ok || cmd.Op == chatcommand.RoutineUsage {
		if cmd.Problem != "" {
			return cmd, text, errors.New(cmd.Problem + ". " + chatcommand.RoutineUsageText)
		}
		return cmd, text, errors.New(chatcommand.RoutineUsageText)
	}
	if cmd.Spec != "" || cmd.TZ != "" {
		spec := cmd.Spec
		if spec == "" {
			spec = "@daily" // an edit of the zone alone: the zone is what is checked
		}
		if _, err := ParseSpec(spec, cmd.TZ, s.cfg.MinInterval); err != nil && cmd.Op == chatcommand.RoutineEdit {
			return cmd, text, fmt.Errorf("routine %s not changed: %w", cmd.ID, err)
		} else if err != nil {
			return cmd, text, err
		}
	}
	return cmd, text, nil
}

// checkTool judges a routine call before the gate: a command that will
// fail parsing is refused with no approval asked, and `routines` (a list)
// is read-only, never gated.
func (s *Scheduler) checkTool(_ context.Context, _ core.ToolContext, raw json.RawMessage) (core.Consequence, error) {
	cmd, _, err := s.parseTool(raw)
	if err != nil {
		return "", err
	}
	if cmd.Op == chatcommand.RoutineList {
		return core.Read, nil
	}
	return core.Write, nil
}

func (s *Scheduler) runTool(ctx context.Context, tc core.ToolContext, raw json.RawMessage) (core.Observation, error) {
	cmd, text, err := s.parseTool(raw)
	if err != nil {
		return core.Observation{}, err
	}
	author, err := s.typedBy(ctx, tc.Run, text)
	if err != nil {
		return core.Observation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := tc.Scope
	sc.Thread = ""
	reply, err := s.command(ctx, sc, author, cmd, tc.Origin)
	for n := 1; errors.Is(err, core.ErrHeadMoved) && n < maxReplans; n++ {
		reply, err = s.command(ctx, sc, author, cmd, tc.Origin) // decided again on the channel as it is now
	}
	if err != nil {
		return core.Observation{}, err
	}
	return core.Observation{Text: reply, Trust: core.Trusted}, nil
}

// typedBy finds the person who typed text in the run (a message.received
// whose mention-stripped text is text) and returns them.
func (s *Scheduler) typedBy(ctx context.Context, run, text string) (core.Person, error) {
	cmds, err := s.cfg.Journal.ReadRun(ctx, run)
	if err != nil {
		return core.Person{}, fmt.Errorf("routine: read run: %w", err)
	}
	for i := len(cmds) - 1; i >= 0; i-- {
		c := cmds[i]
		if c.Kind() != core.KindMessageReceived || c.Actor().Type != core.ActorHuman || c.Redacted() {
			continue
		}
		p, err := core.Decode[*core.MessageReceived](c)
		if err != nil {
			continue
		}
		if strings.TrimSpace(chatcommand.StripLeadingMention(p.Text, p.Mentions)) == text && p.Author.ID == c.Actor().ID {
			return p.Author, nil
		}
	}
	return core.Person{}, errors.New("routines are created and changed only by the command a person types; nobody typed this one")
}

// command carries out cmd, typed by by. origin is the journaled request
// it answers (the tool call's tool.requested): the routine id of an add and
// the command ids of an add or a manual run are keyed by it, so carrying
// the same request out again (a run re-executed after a crash or a lease
// handover) journals nothing new.
func (s *Scheduler) command(ctx context.Context, sc core.Scope, by core.Person, cmd chatcommand.RoutineCommand, origin string) (string, error) {
	cmds, err := s.cfg.Journal.Read(ctx, sc.Key(), 0, 0)
	if err != nil {
		return "", fmt.Errorf("routine: read channel: %w", err)
	}
	routines, err := Fold(cmds)
	if err != nil {
		return "", fmt.Errorf("routine: %w", err)
	}
	var head uint64
	if len(cmds) > 0 {
		head = cmds[len(cmds)-1].Seq()
	}
	if cmd.Op == chatcommand.RoutineAdd {
		sched, err := ParseSpec(cmd.Spec, cmd.TZ, s.cfg.MinInterval)
		if err != nil {
			return "", err
		}
		tz := cmd.TZ
		if tz == "" {
			tz = "UTC"
		}
		id := "r" + strings.ToLower(s.cfg.Boundary.NewID()[20:])
		var key string
		var at time.Time
		if origin != "" {
			key, at = "routine.created:"+origin, originTime(origin, s.cfg.Clock())
			id = "r" + strings.ToLower(core.KeyedID("routine.id:"+origin, at)[20:])
		}
		if r := routines[id]; r == nil || r.CreatedID != core.KeyedID(key, at) || key == "" {
			if err := s.underCaps(ctx, sc, routines, by.ID); err != nil {
				return "", err
			}
			p := &core.RoutineCreated{RoutineID: id, Cron: cmd.Spec, TZ: tz, Instruction: cmd.Instruction, Owner: by.ID, Armed: true, Schedule: cmd.Schedule}
			if err := s.appendKeyed(ctx, by, sc, head, key, at, p); err != nil {
				return "", err
			}
		}
		words := cmd.Schedule
		if words == "" {
			words = chatcommand.Words(cmd.Spec)
		}
		return fmt.Sprintf("✅ Routine %s armed: %s (`%s`, %s) — %s\nNext: %s", id, words, cmd.Spec, tz, cmd.Instruction,
			nextSlots(sched, s.cfg.Clock(), tz, 3)), nil
	}
	if cmd.Op == chatcommand.RoutineList {
		return list(routines, s.cfg.Clock(), s.cfg.Grace), nil
	}
	r := routines[cmd.ID]
	if r == nil || r.Deleted {
		return "", fmt.Errorf("no routine %s in this channel (see `routines`)", cmd.ID)
	}
	if r.Owner != by.ID && (s.eng == nil || !s.eng.IsAdmin(ctx, sc, by)) {
		return "", fmt.Errorf("routine %s belongs to <@%s>: only its owner or an admin can %s it; nothing was changed", r.ID, r.Owner, cmd.Op)
	}
	if pending := r.Proposed && r.ArmedAt.IsZero() && !r.Decided; pending {
		// A proposal is armed only by its requester: the Arm click, or the
		// requester typing resume. Until then nobody runs or pauses it.
		switch {
		case cmd.Op == chatcommand.RoutineResume && by.ID != r.Owner,
			cmd.Op == chatcommand.RoutineRun, cmd.Op == chatcommand.RoutinePause:
			return "", fmt.Errorf("routine %s is a proposal waiting for <@%s> to arm or discard it on its card; nothing was changed", r.ID, r.Owner)
		}
	}
	if cmd.Op == chatcommand.RoutineRun {
		return s.runNow(ctx, sc, by, r, origin, head)
	}
	if cmd.Op == chatcommand.RoutineEdit {
		return s.edit(ctx, sc, by, r, cmd, head)
	}
	p := &core.RoutineChanged{RoutineID: r.ID}
	var done string
	switch cmd.Op {
	case chatcommand.RoutinePause:
		done = "⏸️ Routine " + r.ID + " paused."
	case chatcommand.RoutineResume:
		p.Armed = true
		done = "▶️ Routine " + r.ID + " resumed (slots missed while paused do not fire)."
	case chatcommand.RoutineDelete:
		p.Deleted = true
		done = "🗑️ Routine " + r.ID + " deleted."
	}
	if err := s.appendHuman(ctx, by, sc, head, p); err != nil {
		return "", err
	}
	return done, nil
}

// runNow answers `routine run`: a manual firing of an armed routine, within
// the channel's daily budget and at most once per minimum interval (since
// its last firing, scheduled or manual).
func (s *Scheduler) runNow(ctx context.Context, sc core.Scope, by core.Person, r *Routine, origin string, head uint64) (string, error) {
	if s.eng == nil {
		return "", errors.New("scheduler: no engine bound")
	}
	var key string
	var at time.Time
	if origin != "" {
		key, at = "routine.fired:manual:"+origin, originTime(origin, s.cfg.Clock())
		for _, f := range r.Firings {
			if f.CmdID == core.KeyedID(key, at) {
				// This request fired it already: a replay fires nothing more.
				return fmt.Sprintf("▶️ Routine %s was run for this request already; its result is posted in the channel.", r.ID), nil
			}
		}
	}
	if !r.Armed {
		return "", fmt.Errorf("routine %s is paused: only an armed routine can be run (`routine resume %s` arms it); nothing was run", r.ID, r.ID)
	}
	now := s.cfg.Clock().UTC()
	for _, f := range r.Firings {
		if f.Outcome == OutcomeSkipped {
			continue
		}
		if wait := f.At.Add(s.cfg.MinInterval).Sub(now); wait > 0 {
			return "", fmt.Errorf("routine %s fired at %s: it can run again in %s (at most once per %s); nothing was run",
				r.ID, f.At.UTC().Format("15:04:05 MST"), wait.Round(time.Second), s.cfg.MinInterval)
		}
	}
	if why := s.overBudget(ctx, r); why != "" {
		return "", fmt.Errorf("routine %s not run: %s", r.ID, why)
	}
	f, err := s.fireKeyed(ctx, r, &core.RoutineFired{RoutineID: r.ID, Slot: now, Outcome: OutcomeManual, Reason: "run by " + by.ID}, head, key, at)
	if err != nil {
		return "", err
	}
	all, err := s.cfg.Journal.Read(ctx, sc.Key(), 0, 0)
	if err != nil {
		return "", err
	}
	if err := s.perform(ctx, r, f, digestFor(r, f, all), false); err != nil {
		return "", err
	}
	if s.eng.HasModel() {
		return fmt.Sprintf("▶️ Routine %s is running; its result will be posted in the channel.", r.ID), nil
	}
	return fmt.Sprintf("▶️ Routine %s ran; its digest is posted in the channel.", r.ID), nil
}

// edit changes what cmd names of r and keeps the rest, armed or paused as
// it was. The new schedule is checked like a new routine's; a changed
// spec, zone or instruction re-settles its drift anchor (Fold).
func (s *Scheduler) edit(ctx context.Context, sc core.Scope, by core.Person, r *Routine, cmd chatcommand.RoutineCommand, head uint64) (string, error) {
	if r.Proposed && !r.Armed && !r.Decided {
		return "", fmt.Errorf("routine %s is a proposal waiting for <@%s> to arm or discard it on its card; nothing was changed", r.ID, r.Owner)
	}
	spec, tz, instr := r.Spec, r.TZ, r.Instruction
	p := &core.RoutineChanged{RoutineID: r.ID, Armed: r.Armed}
	if cmd.Spec != "" && cmd.Spec != spec {
		spec, p.Cron, p.Schedule = cmd.Spec, cmd.Spec, cmd.Schedule
	}
	if cmd.TZ != "" && cmd.TZ != tz {
		tz, p.TZ = cmd.TZ, cmd.TZ
	}
	if cmd.Instruction != "" && cmd.Instruction != instr {
		instr, p.Instruction = cmd.Instruction, cmd.Instruction
	}
	if p.Cron == "" && p.TZ == "" && p.Instruction == "" {
		return fmt.Sprintf("Routine %s already is `%s` (%s) — %s; nothing was changed.", r.ID, spec, tz, firstLine(instr, 120)), nil
	}
	sched, err := ParseSpec(spec, tz, s.cfg.MinInterval)
	if err != nil {
		return "", fmt.Errorf("routine %s not changed: %w", r.ID, err)
	}
	if err := s.appendHuman(ctx, by, sc, head, p); err != nil {
		return "", err
	}
	state := "armed; next: " + nextSlots(sched, s.cfg.Clock(), tz, 3)
	if !r.Armed {
		state = "still paused (`routine resume " + r.ID + "` arms it)"
	}
	return fmt.Sprintf("✏️ Routine %s changed: `%s` (%s) — %s\nIt is %s. Drift is judged afresh from its next firings.",
		r.ID, spec, tz, firstLine(instr, 120), state), nil
}

func (s *Scheduler) appendHuman(ctx context.Context, by core.Person, sc core.Scope, head uint64, p core.Payload) error {
	return s.appendKeyed(ctx, by, sc, head, "", time.Time{}, p)
}

// appendKeyed journals p as by's; with a key, under the id KeyedID(key, at).
// head is the seq of the channel's last command the decision was folded from
// (appendAt).
func (s *Scheduler) appendKeyed(ctx context.Context, by core.Person, sc core.Scope, head uint64, key string, at time.Time, p core.Payload) error {
	d, err := s.cfg.Boundary.Human(by, sc, core.Meta{}, p)
	if key != "" {
		d, err = s.cfg.Boundary.HumanKeyed(by, key, at, sc, core.Meta{}, p)
	}
	if err != nil {
		return fmt.Errorf("routine: %w", err)
	}
	if _, err := s.appendAt(ctx, head, d); err != nil {
		return fmt.Errorf("routine: journal: %w", err)
	}
	return nil
}

func nextSlots(sched Schedule, now time.Time, tz string, n int) string {
	loc, _ := time.LoadLocation(tz)
	var out []string
	t := now
	for range n {
		t = sched.Next(t)
		out = append(out, t.In(loc).Format("Mon 2 Jan 15:04 MST"))
	}
	return strings.Join(out, ", ")
}

// firingStatus says what happened to f: run status and delivery apart, a
// post that never arrived never shown as done.
func firingStatus(f *Firing, now time.Time, grace time.Duration) string {
	if f.Coalesced {
		return "skipped (" + f.Reason + ")"
	}
	if f.Outcome == OutcomeSkipped {
		return fmt.Sprintf("skipped (%d slot(s) missed; %s)", f.Missed+1, f.Reason)
	}
	run := ""
	if f.Started {
		run = "run " + f.RunStatus + ", "
	}
	switch {
	case f.Delivered:
		return run + "posted"
	case now.Sub(f.At) <= grace:
		return run + "post not confirmed yet (retrying)"
	default:
		return run + "post FAILED (owner told)"
	}
}

// settled counts the successful firings of r's current epoch.
func settled(r *Routine) int {
	n := 0
	for _, f := range r.Firings {
		if f.Epoch == r.Epoch && f.Succeeded() && f.Outcome != OutcomeManual {
			n++
		}
	}
	return n
}

func list(routines map[string]*Routine, now time.Time, grace time.Duration) string {
	var b strings.Builder
	n := 0
	for _, r := range sorted(routines) {
		if r.Deleted {
			continue
		}
		n++
		state := "armed"
		if !r.Armed {
			state = "paused"
		}
		// The schedule in the words its person typed (a routine from
		// before they were kept, or typed as a spec, says the spec in
		// words), the spec itself beside it.
		when := "`" + r.Spec + "`"
		if r.Schedule != "" {
			when = r.Schedule + " (`" + r.Spec + "`"
		} else if w := chatcommand.Words(r.Spec); w != r.Spec {
			when = w + " (`" + r.Spec + "`"
		} else {
			when += " ("
		}
		fmt.Fprintf(&b, "• %s %s, %s) by <@%s>, %s — %s", r.ID, when, r.TZ, r.Owner, state, firstLine(r.Instruction, 120))
		if len(r.Firings) > 0 {
			f := r.Firings[len(r.Firings)-1]
			fmt.Fprintf(&b, "; last %s %s: %s", f.Outcome, f.Slot.Format("2006-01-02 15:04 MST"), firingStatus(f, now, grace))
			var failed []*Firing
			for _, g := range r.Firings[:len(r.Firings)-1] {
				if g.Outcome != OutcomeSkipped && !g.Delivered && now.Sub(g.At) > grace {
					failed = append(failed, g)
				}
			}
			if len(failed) > 0 {
				fmt.Fprintf(&b, "; ⚠️ %d earlier post(s) FAILED (latest slot %s)", len(failed), failed[len(failed)-1].Slot.Format("2006-01-02 15:04 MST"))
			}
		}
		if cur, _, _ := Anchors(r); cur == nil {
			fmt.Fprintf(&b, "; settling (%d of %d firings)", settled(r), SettleFirings)
		}
		b.WriteString("\n")
	}
	if n == 0 {
		return "No routines in this channel. Add one with `routine add <spec> [tz <zone>]: <instruction>`."
	}
	return "Routines in this channel:\n" + strings.TrimRight(b.String(), "\n")
}

// originTime is the time the request's id (a ULID) carries, so an id keyed
// by it is the same wherever and whenever it is drafted.
func originTime(origin string, fallback time.Time) time.Time {
	u, err := ulid.ParseStrict(origin)
	if err != nil {
		return fallback
	}
	return ulid.Time(u.Time())
}
