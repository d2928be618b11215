package main

import (
	"context"
	"flag"
	"io"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm"
	"github.com/marlowe-bot/marlowe/memory"
)

// cmdMemory runs `bot memory rebuild --channel KEY | --all [--reembed] [--dry-run]`.
func cmdMemory(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "rebuild" {
		return usageErr("usage: bot memory rebuild --channel KEY | --all [--reembed] [--dry-run]")
	}
	fs := flag.NewFlagSet("memory rebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a memory.RebuildArgs
	fs.StringVar(&a.Channel, "channel", "", "rebuild one channel (platform/workspace/channel)")
	fs.BoolVar(&a.All, "all", false, "rebuild every channel")
	fs.BoolVar(&a.Reembed, "reembed", false, "compute every vector again with the configured embedding model")
	fs.BoolVar(&a.DryRun, "dry-run", false, "report what would change without writing")
	if err := parseFlags(fs, args[1:]); err != nil {
		return usageErr("memory rebuild: %v", err)
	}
	if (a.Channel == "") == !a.All {
		return usageErr("memory rebuild: give exactly one of --channel KEY or --all")
	}
	if a.Channel != "" {
		if _, err := core.ParseChannelKey(a.Channel); err != nil {
			return usageErr("memory rebuild: %v", err)
		}
	}
	// The report on stdout says what each channel's rebuild did; the
	// memory service's own info line per channel would say it twice.
	level := cfg.LogLevel
	if level == "info" {
		level = "warn"
	}
	log := newLogger(stderr, level)
	_, emb, _, err := llm.FromEnv(cfg.Getenv, llm.WithLogger(log))
	if err != nil {
		return err
	}
	if a.Reembed && emb == nil {
		return usageErr("memory rebuild: --reembed needs an embedding model: set %s (and %s when it is not the model's endpoint)",
			llm.EnvEmbeddingModel, llm.EnvEmbeddingBaseURL)
	}
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	mem, err := newMemory(st, core.NewBoundary(nil), emb, core.Policy{}, log)
	if err != nil {
		return err
	}
	return memory.RebuildCommand(ctx, mem, a, stdout)
}
