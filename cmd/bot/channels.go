package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// cmdChannels lists the journal's channel keys (what `replay --channel`
// and `verify --channel` take) with each one's command count and last
// activity, read from the channel's head: one read per channel.
func cmdChannels(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("channels", flag.ContinueOnError)
	if err := parseFlags(flags, args); err != nil {
		return usageErr("channels: %v", err)
	}
	if flags.NArg() > 0 {
		return usageErr("channels: unexpected argument %q", flags.Arg(0))
	}
	j, closeJournal, err := openJournalReadOnly(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeJournal()
	chs, err := j.Channels(ctx)
	if err != nil {
		return fmt.Errorf("channels: %w", err)
	}
	if len(chs) == 0 {
		fmt.Fprintln(stdout, "no channels: the journal is empty")
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHANNEL\tCOMMANDS\tLAST ACTIVITY")
	for _, ch := range chs {
		head, _, err := j.Head(ctx, ch)
		if err != nil {
			return fmt.Errorf("channels: head of %s: %w", ch, err)
		}
		last := "-"
		if head > 0 {
			cmds, err := j.Read(ctx, ch, head, 1)
			if err != nil {
				return fmt.Errorf("channels: read %s: %w", ch, err)
			}
			if len(cmds) == 1 {
				last = cmds[0].At().UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", ch, head, last)
	}
	return w.Flush()
}
