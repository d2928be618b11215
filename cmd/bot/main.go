// Command bot is Marlowe: a channel-resident AI teammate. This package is the
// composition root: the only place that wires concrete stores, surfaces and
// model providers together.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	goredis "github.com/redis/go-redis/v9"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `Marlowe — a teammate that lives in your channels.

Usage:
  bot [command] [flags]

Commands:
  serve            run the bot (default)
  migrate          apply database migrations and exit
  verify           check every channel's hash chain, signatures and redactions
                   with public keys only (the current key's and
                   MARLOWE_VERIFY_KEYS); never creates a key
  keys             print the current signing key's id and public key
                   (--public: the public key only)
  keys generate    print a new private key for MARLOWE_SIGNING_KEY
  replay           fold one channel's journal and print its state as JSON
                   (--channel platform/workspace/channel), or one run's
                   replayed state (--run ID); no model or platform is called
  channels         list channel keys with command counts and last activity
  memory rebuild   rebuild the memory index from the journal
                   (--channel platform/workspace/channel or --all)
  intent replay    run an intent scenario file (FILE or - for stdin) through
                   the real filter and print one decision per message
  doctor           check configuration, keys, store, Redis, the model (one
                   real call), embeddings and each platform; exit 1 on any ✗
  healthcheck      GET /readyz on MARLOWE_HTTP_ADDR; exit 0 when ready
                   (the container healthcheck: the image has no curl)
  version          print the version

Every command answers --help (bot COMMAND --help, or bot help COMMAND).

Configuration comes from MARLOWE_* environment variables and, optionally, a
KEY=VALUE file named by MARLOWE_CONFIG (environment wins). See README.md.
`

func main() {
	// go-redis prints each failed pool dial to stderr ("redis: … pool.go:
	// … failed to dial"): noise before doctor's one ✗ line and serve's
	// error, which already say it with the fix.
	goredis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			fmt.Fprintln(os.Stderr, "bot:", redactDSN(ee.err.Error()))
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "bot:", redactDSN(err.Error()))
		os.Exit(1)
	}
}

// quietRedis drops go-redis's own log lines (see main).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// exitError carries a specific exit code (2 for usage errors).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "-h", "--help", "help":
		if len(args) > 0 && printHelp(stdout, args[0]) {
			return nil
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	if wantsHelp(args) && printHelp(stdout, cmd) {
		return nil
	}
	switch cmd {
	case "version", "--version":
		fmt.Fprintf(stdout, "marlowe %s\n", versionString())
		return nil
	case "intent":
		return cmdIntent(ctx, args, stdin, stdout)
	case "doctor":
		return cmdDoctor(ctx, getenv, args, stdout)
	case "healthcheck":
		return cmdHealthcheck(ctx, getenv, args, stdout)
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	switch cmd {
	case "serve":
		return cmdServe(ctx, cfg, args, stderr)
	case "migrate":
		return cmdMigrate(ctx, cfg, args, stdout)
	case "verify":
		return cmdVerify(ctx, cfg, args, stdout)
	case "keys":
		return cmdKeys(cfg, args, stdout, stderr)
	case "replay":
		return cmdReplay(ctx, cfg, args, stdout)
	case "channels":
		return cmdChannels(ctx, cfg, args, stdout)
	case "memory":
		return cmdMemory(ctx, cfg, args, stdout, stderr)
	}
	return usageErr("unknown command %q (see bot --help)", cmd)
}
