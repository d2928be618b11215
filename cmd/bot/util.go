package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// parseFlags parses a subcommand's flags without the flag package's own
// output (a raw "flag provided but not defined" and a usage dump on
// stderr): a mistake comes back as one line naming the flags there are.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if err == nil {
		return nil
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	known := "it takes no flags"
	if len(names) > 0 {
		known = "its flags: " + strings.Join(names, ", ")
	}
	if errors.Is(err, flag.ErrHelp) {
		return errors.New(known)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		msg = "unknown flag --" + strings.TrimLeft(f, "-")
	}
	return fmt.Errorf("%s (%s)", msg, known)
}
