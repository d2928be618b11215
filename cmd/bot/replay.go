package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/engine"
)

// cmdReplay folds one channel's journal (or one run's commands) and prints
// the derived state. It calls no model and no platform: state is a function
// of the journal, with recorded observations fed back in. It needs no key.
func cmdReplay(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	channel := fs.String("channel", "", "channel key platform/workspace/channel")
	runID := fs.String("run", "", "a run id: print that run's replayed state instead")
	if err := parseFlags(fs, args); err != nil {
		return usageErr("replay: %v", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if *runID != "" {
		return replayRun(ctx, cfg, *runID, enc)
	}
	if *channel == "" {
		return usageErr("replay: --channel (or --run) is required")
	}
	if _, err := core.ParseChannelKey(*channel); err != nil {
		return usageErr("replay: %v", err)
	}
	j, closeJournal, err := openJournalReadOnly(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeJournal()
	ch := core.ChannelKey(*channel)
	cmds, err := j.Read(ctx, ch, 1, 0)
	if err != nil {
		return fmt.Errorf("replay %s: read journal: %w", ch, err)
	}
	if len(cmds) == 0 {
		return fmt.Errorf("replay %s: no commands in this channel", ch)
	}
	state, err := fold.Fold(ch, cmds)
	if err != nil {
		return fmt.Errorf("replay %s: %w", ch, err)
	}
	return enc.Encode(state)
}

func replayRun(ctx context.Context, cfg config, id string, enc *json.Encoder) error {
	j, closeJournal, err := openJournalReadOnly(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeJournal()
	cmds, err := j.ReadRun(ctx, id)
	if err != nil {
		return fmt.Errorf("replay run %s: read journal: %w", id, err)
	}
	if len(cmds) == 0 {
		return fmt.Errorf("replay run %s: no such run", id)
	}
	rs, err := engine.ReadRunReplay(ctx, j, id)
	if err != nil {
		return fmt.Errorf("replay run %s: %w", id, err)
	}
	return enc.Encode(runJSON(rs))
}

// runReplayJSON is engine.RunReplay in the snake_case every other command
// prints (the core type carries no JSON tags: it is never stored).
type runReplayJSON struct {
	ID           string                 `json:"id"`
	Scope        core.Scope             `json:"scope"`
	Status       core.RunStatus         `json:"status"`
	Reason       string                 `json:"reason,omitempty"`
	Requester    core.Person            `json:"requester"`
	Trigger      string                 `json:"trigger"`
	Instruction  string                 `json:"instruction"`
	Conversation string                 `json:"conversation,omitempty"`
	StartedAt    time.Time              `json:"started_at"`
	Steps        int                    `json:"steps"`
	Tokens       int                    `json:"tokens"`
	Messages     []core.Message         `json:"messages"`
	Effects      map[string]messageJSON `json:"effects"`
}

type messageJSON struct {
	Scope core.Scope `json:"scope"`
	ID    string     `json:"id"`
	At    time.Time  `json:"at"`
}

func runJSON(rs *engine.RunReplay) runReplayJSON {
	out := runReplayJSON{
		ID: rs.ID, Scope: rs.Scope, Status: rs.Status, Reason: rs.Reason, Requester: rs.Requester,
		Trigger: rs.Trigger, Instruction: rs.Instruction, Conversation: rs.Conversation, StartedAt: rs.StartedAt, Steps: rs.Steps, Tokens: rs.Tokens,
		Messages: rs.Messages, Effects: make(map[string]messageJSON, len(rs.Effects)),
	}
	for k, ref := range rs.Effects {
		out.Effects[k] = messageJSON{Scope: ref.Scope, ID: ref.ID, At: ref.At}
	}
	return out
}
