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
)

// ProposeToolName is the model's tool for proposing a routine.
const ProposeToolName = "schedule_routine"

// Proposer signs a proposal's card (engine.Engine): its Arm and Discard
// tokens are verified when clicked, so the card must come from the engine.
type Proposer interface {
	RoutineProposalCard(p core.RoutineProposal) (*core.Card, error)
}

// ProposeTool is the model's way to set up a routine. It never arms one:
// the routine is journaled disarmed, owned by the person whose message
// started the run, and shown to them as a card (the spec in words, the
// next three firings in the routine's zone, the instruction); only their
// click on Arm arms it (core/proposal.go).
func (s *Scheduler) ProposeTool() core.Tool {
	return core.Tool{
		Name: ProposeToolName,
		Description: "Propose a recurring routine for the person you are helping. It is created DISARMED and shown to them " +
			"as a card; it runs only after they click Arm. spec: 5-field cron (`0 9 * * 1-5`), @hourly, @daily, @weekly or " +
			"`@every 30m`; tz: IANA zone such as Europe/Paris (default UTC); instruction: what to do at each firing.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"spec":{"type":"string","description":"cron spec, descriptor or @every <duration>"},` +
			`"tz":{"type":"string","description":"IANA time zone of the spec (default UTC)"},` +
			`"instruction":{"type":"string","description":"what the routine does at each firing"}},` +
			`"required":["spec","instruction"],"additionalProperties":false}`),
		// Write, not Send: it journals a disarmed routine and shows a card
		// in the run's own thread; nothing runs until a person arms it.
		Consequence: core.Write,
		Check: func(_ context.Context, _ core.ToolContext, raw json.RawMessage) (core.Consequence, error) {
			_, err := s.proposeArgs(raw)
			return "", err
		},
		Run: s.runPropose,
	}
}

type proposeArgs struct {
	Spec, TZ, Instruction string
	sched                 Schedule
}

// proposeArgs reads and checks schedule_routine's arguments (before the
// gate asks anyone, and again when it runs).
func (s *Scheduler) proposeArgs(raw json.RawMessage) (proposeArgs, error) {
	var args struct {
		Spec        string `json:"spec"`
		TZ          string `json:"tz"`
		Instruction string `json:"instruction"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return proposeArgs{}, fmt.Errorf("schedule_routine: %w", err)
	}
	a := proposeArgs{Spec: strings.TrimSpace(args.Spec), TZ: strings.TrimSpace(args.TZ), Instruction: strings.TrimSpace(args.Instruction)}
	if a.Instruction == "" {
		return a, errors.New("schedule_routine: the instruction is empty")
	}
	if len(a.Instruction) > maxInstruction {
		return a, fmt.Errorf("schedule_routine: the instruction is longer than %d bytes", maxInstruction)
	}
	if a.TZ == "" {
		a.TZ = "UTC"
	}
	sched, err := ParseSpec(a.Spec, a.TZ, s.cfg.MinInterval)
	if err != nil {
		return a, err
	}
	a.sched = sched
	return a, nil
}

// maxInstruction bounds a proposed instruction (it is seeded into every
// firing's run).
const maxInstruction = 2000

func (s *Scheduler) runPropose(ctx context.Context, tc core.ToolContext, raw json.RawMessage) (core.Observation, error) {
	a, err := s.proposeArgs(raw)
	if err != nil {
		return core.Observation{}, err
	}
	spec, tz, instr, sched := a.Spec, a.TZ, a.Instruction, a.sched
	if tc.Actor.ID == "" || tc.Actor.IsBot {
		return core.Observation{}, errors.New("schedule_routine: this run has no person to propose the routine to")
	}
	s.mu.Lock()
	eng := s.eng
	s.mu.Unlock()
	prop, ok := eng.(Proposer)
	if !ok {
		return core.Observation{}, errors.New("schedule_routine: routines cannot be proposed on this bot (no engine bound)")
	}
	s.mu.Lock()
	r, err := s.propose(ctx, tc, spec, tz, instr)
	for n := 1; errors.Is(err, core.ErrHeadMoved) && n < maxReplans; n++ {
		r, err = s.propose(ctx, tc, spec, tz, instr) // decided again on the channel as it is now
	}
	s.mu.Unlock()
	if err != nil {
		return core.Observation{}, err
	}
	next := nextTimes(sched, s.cfg.Clock(), tz, 3)
	card, err := prop.RoutineProposalCard(core.RoutineProposal{RoutineID: r.ID, CreatedID: r.CreatedID, Owner: r.Owner,
		Spec: r.Spec, Words: chatcommand.Words(r.Spec), TZ: r.TZ, Next: next, Instruction: r.Instruction})
	if err != nil {
		return core.Observation{}, fmt.Errorf("schedule_routine: card: %w", err)
	}
	// Posted in the run's thread, keyed by the call: a re-executed call
	// shows the same card once.
	if _, err := tc.Surface.Post(ctx, core.Outbound{Scope: tc.Scope, Text: card.Title, Card: card, Priority: core.PriorityHigh}); err != nil {
		return core.Observation{}, fmt.Errorf("schedule_routine: show card: %w", err)
	}
	return core.Observation{Trust: core.Trusted, Text: fmt.Sprintf(
		"Routine %s is proposed but NOT armed: it does nothing until <@%s> clicks Arm on the card. Schedule: %s (%s); next: %s.",
		r.ID, r.Owner, chatcommand.Words(r.Spec), r.TZ, strings.Join(next, "; "))}, nil
}

// propose journals the disarmed routine, once per tool call: its id is
// derived from the call's effect key, so a call re-executed after a crash
// finds the routine it already created. Callers hold s.mu.
func (s *Scheduler) propose(ctx context.Context, tc core.ToolContext, spec, tz, instr string) (*Routine, error) {
	sc := tc.Scope // the run's thread: the card and the click's replies live there
	top := sc
	top.Thread = ""
	cmds, err := s.cfg.Journal.Read(ctx, top.Key(), 0, 0)
	if err != nil {
		return nil, fmt.Errorf("schedule_routine: read channel: %w", err)
	}
	id := "r" + strings.ToLower(core.KeyedID("routine.proposed:"+tc.EffectKey, time.Unix(0, 0))[20:])
	rs, err := Fold(cmds)
	if err != nil {
		return nil, fmt.Errorf("schedule_routine: %w", err)
	}
	if r := rs[id]; r != nil {
		if !r.Proposed || r.Owner != tc.Actor.ID {
			return nil, fmt.Errorf("schedule_routine: routine id %s is taken; ask again", id)
		}
		return r, nil
	}
	if err := s.underCaps(ctx, top, rs, tc.Actor.ID); err != nil {
		return nil, fmt.Errorf("schedule_routine: %w", err)
	}
	p := &core.RoutineCreated{RoutineID: id, Cron: spec, TZ: tz, Instruction: instr, Owner: tc.Actor.ID, Armed: false}
	d, err := s.cfg.Boundary.Agent(tc.Run, sc, core.Meta{Cause: tc.Origin}, p)
	if err != nil {
		return nil, fmt.Errorf("schedule_routine: %w", err)
	}
	var head uint64
	if len(cmds) > 0 {
		head = cmds[len(cmds)-1].Seq()
	}
	if _, err := s.appendAt(ctx, head, d); err != nil {
		return nil, fmt.Errorf("schedule_routine: journal: %w", err)
	}
	return &Routine{ID: id, Owner: tc.Actor.ID, Spec: spec, TZ: tz, Instruction: instr, CreatedID: d.ID(), Proposed: true}, nil
}

// nextTimes are the next n firings after now, formatted in tz.
func nextTimes(sched Schedule, now time.Time, tz string, n int) []string {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	var out []string
	t := now
	for range n {
		t = sched.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.In(loc).Format("Mon 2 Jan 2006 15:04 MST"))
	}
	return out
}
