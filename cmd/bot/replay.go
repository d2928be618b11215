package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/marlowe-bot/marlowe/core"
)

// cmdReplay folds one channel's journal and prints the derived state. It
// calls no model and no platform: state is a function of the journal.
func cmdReplay(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	channel := fs.String("channel", "", "channel key platform/workspace/channel (required)")
	if err := fs.Parse(args); err != nil {
		return usageErr("replay: %v", err)
	}
	if *channel == "" {
		return usageErr("replay: --channel is required")
	}
	if _, err := core.ParseChannelKey(*channel); err != nil {
		return usageErr("replay: %v", err)
	}
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	ch := core.ChannelKey(*channel)
	cmds, err := st.Journal.Read(ctx, ch, 1, 0)
	if err != nil {
		return fmt.Errorf("replay %s: read journal: %w", ch, err)
	}
	if len(cmds) == 0 {
		return fmt.Errorf("replay %s: no commands in this channel", ch)
	}
	state, err := core.Fold(ch, cmds)
	if err != nil {
		return fmt.Errorf("replay %s: %w", ch, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(state)
}
