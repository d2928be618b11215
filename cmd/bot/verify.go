package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// cmdVerify re-checks every chain, signature and redaction with public keys
// only: the current signing key's (MARLOWE_SIGNING_KEY or the data
// directory's key file, read but never created) and the retired keys in
// MARLOWE_VERIFY_KEYS.
func cmdVerify(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("verify", flag.ContinueOnError)
	channel := flags.String("channel", "", "verify only this channel (platform/workspace/channel)")
	if err := parseFlags(flags, args); err != nil {
		return usageErr("verify: %v", err)
	}
	if *channel != "" {
		if _, err := core.ParseChannelKey(*channel); err != nil {
			return usageErr("verify: %v", err)
		}
	}
	signer, _, err := readSigner(cfg)
	if err != nil {
		return usageErr("verify: %v", err)
	}
	v, err := trustedVerifier(cfg, signer)
	if err != nil {
		return usageErr("verify: %v", err)
	}
	// With no journal there is nothing to verify: say so before asking for
	// verify keys (bad key settings are still reported first).
	j, closeJournal, err := openJournalReadOnly(ctx, cfg)
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return exitError{code: 1, err: fmt.Errorf("verify: %w", ee.err)}
		}
		return err
	}
	defer closeJournal()
	if v == nil {
		return usageErr("verify: no verification key: set MARLOWE_VERIFY_KEYS to the journal's public key(s), comma-separated base64 " +
			"(`bot keys --public` prints one where its signing key is), or MARLOWE_SIGNING_KEY, " +
			"or MARLOWE_DATA_DIR to the data directory holding " + keyFile)
	}
	if *channel != "" {
		if err := knownChannel(ctx, j, core.ChannelKey(*channel)); err != nil {
			return exitError{code: 1, err: fmt.Errorf("verify: %w", err)}
		}
	}
	start := time.Now()
	var n int
	if *channel != "" {
		n, err = core.VerifyChannel(ctx, j, v, core.ChannelKey(*channel))
	} else {
		n, err = core.VerifyAll(ctx, j, v)
	}
	var ce *core.ChainError
	if errors.As(err, &ce) {
		fmt.Fprintf(stdout, "FAIL channel %s seq %d: %s\n", ce.Channel, ce.Seq, ce.Reason)
		var uk *core.UntrustedKeyError
		if errors.As(err, &uk) {
			fmt.Fprintf(stdout, "key %s is not trusted (trusted: %s): if it is a retired signing key, add its public key to MARLOWE_VERIFY_KEYS.%s\n",
				uk.Key, strings.Join(v.KeyIDs(), ", "), fileKeyHint(cfg, uk.Key))
		}
		return exitError{code: 1, err: fmt.Errorf("verify: first bad command is %s seq %d", ce.Channel, ce.Seq)}
	}
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	fmt.Fprintf(stdout, "ok: %d commands verified in %s with key(s) %s\n", n, time.Since(start).Round(time.Millisecond), strings.Join(v.KeyIDs(), ", "))
	return nil
}

// knownChannel reports a channel the journal has no command in: a typo must
// not pass as "ok: 0 commands".
func knownChannel(ctx context.Context, j core.Journal, ch core.ChannelKey) error {
	chs, err := j.Channels(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(chs, ch) {
		return nil
	}
	names := make([]string, 0, min(len(chs), 5))
	for _, c := range chs[:min(len(chs), 5)] {
		names = append(names, string(c))
	}
	known := "the journal is empty"
	if len(chs) > 0 {
		known = fmt.Sprintf("it has %d channel(s): %s", len(chs), strings.Join(names, ", "))
		if len(chs) > len(names) {
			known += ", …"
		}
	}
	return fmt.Errorf("no channel %s in the journal (%s)", ch, known)
}
