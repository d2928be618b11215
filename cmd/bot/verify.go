package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

func cmdVerify(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	channel := fs.String("channel", "", "verify only this channel (platform/workspace/channel)")
	if err := fs.Parse(args); err != nil {
		return usageErr("verify: %v", err)
	}
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	v := st.Signer.Verifier()
	var n int
	if *channel != "" {
		if _, err := core.ParseChannelKey(*channel); err != nil {
			return usageErr("verify: %v", err)
		}
		n, err = core.VerifyChannel(ctx, st.Journal, v, core.ChannelKey(*channel))
	} else {
		n, err = core.VerifyAll(ctx, st.Journal, v)
	}
	var ce *core.ChainError
	if errors.As(err, &ce) {
		fmt.Fprintf(stdout, "FAIL channel %s seq %d: %s\n", ce.Channel, ce.Seq, ce.Reason)
		return exitError{code: 1, err: fmt.Errorf("verify: first bad command is %s seq %d", ce.Channel, ce.Seq)}
	}
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	fmt.Fprintf(stdout, "ok: %d commands verified in %s\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}
