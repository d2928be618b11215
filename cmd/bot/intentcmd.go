package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/marlowe-bot/marlowe/intent"
)

// cmdIntent runs `bot intent replay FILE|-`.
func cmdIntent(_ context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 2 || args[0] != "replay" {
		return usageErr("usage: bot intent replay FILE (or - for stdin)")
	}
	in := stdin
	if args[1] != "-" {
		f, err := os.Open(args[1])
		if err != nil {
			return fmt.Errorf("intent replay: %w", err)
		}
		defer f.Close()
		in = f
	}
	if err := intent.ReplayScenario(in, stdout); err != nil {
		return fmt.Errorf("intent replay %s: %w", args[1], err)
	}
	return nil
}
