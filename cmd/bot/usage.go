package main

import (
	"fmt"
	"io"
	"slices"
)

// commandUsage is each subcommand's --help text.
var commandUsage = map[string]string{
	"serve": `Usage: bot serve

Run the bot (the default command). Configuration comes from the environment
(MARLOWE_*, SLACK_*, model keys; see .env.example). With no platform
configured it opens the sandbox web surface; with one it does not (set
MARLOWE_SANDBOX=1 to run both).

On MARLOWE_HTTP_ADDR (default 127.0.0.1:8081), without authentication:
  GET  /healthz                 liveness: ok, or 503 naming a revoked platform
  GET  /readyz                  readiness: "ready" or "not ready", then one line
                                per check: drain, journal, redis (when set),
                                each surface that can tell (slack), each
                                surface's delivery queue (discord: what waits
                                for a retry), leases
  GET  /metrics                 Prometheus metrics
  GET  /export                  a person's 'export my data' JSON, only with the
                                signed, expiring link the bot gave them
                                (MARLOWE_PUBLIC_URL, default http://MARLOWE_HTTP_ADDR)
  GET  /connect, POST /connect  a person's sign-in link to a connector that acts as
                                them, and GET /connect/callback, the OAuth redirect
                                (MARLOWE_SECRETS_KEY and MARLOWE_PUBLIC_URL set)
  POST /slack/events            Slack Events API (MARLOWE_SLACK_MODE=http)
  POST /slack/interactions      Slack button clicks (MARLOWE_SLACK_MODE=http)
  POST /discord/interactions    Discord interactions (DISCORD_PUBLIC_KEY set)
  POST /telegram/webhook        Telegram updates (MARLOWE_TELEGRAM_MODE=webhook)
  GET  /telegram/status         Telegram connection as JSON: ready, mode, privacy
                                mode (TELEGRAM_BOT_TOKEN set, either mode)
The sandbox web workspace, when on, has its own address, MARLOWE_SANDBOX_ADDR
(default 127.0.0.1:8080): the page, /static/, and its API under /api/.
`,
	"doctor": `Usage: bot doctor [--json]

Check what serve needs and print one line per check (✓ ok, ! look at it,
✗ broken, with the fix): configuration, signing and verify keys, the store
(connection, migrations, pgvector), Redis, the model and any fallback (one
real minimal call each), embeddings, and every configured platform (Slack:
auth.test, token scopes against deploy/slack/manifest.yml, the app token,
look-alike handles). It changes nothing. Exit status 1 when any check fails.

  --json   print the checks as a JSON array instead
`,
	"healthcheck": `Usage: bot healthcheck

GET /readyz on MARLOWE_HTTP_ADDR (a wildcard host means this machine) and
exit 0 when the bot is ready, 1 when it is not or does not answer. For
container healthchecks: the image has no curl.
`,
	"migrate": `Usage: bot migrate

Apply pending database migrations and exit (serve applies them too).
`,
	"verify": `Usage: bot verify [--channel platform/workspace/channel]

Check every channel's hash chain, signatures and redactions with public
keys only: the current signing key's (MARLOWE_SIGNING_KEY or the data
directory's key, read but never created) and MARLOWE_VERIFY_KEYS.
Exit status 1 on the first bad command, or when --channel names a channel
the journal does not have.
`,
	"keys": `Usage: bot keys [--public]
       bot keys generate

keys prints the current signing key's id and public key (--public: the
public key only) and the retired keys trusted for verification.
keys generate prints a new private key for MARLOWE_SIGNING_KEY (and its
public key on stderr). Neither stores a key.
`,
	"replay": `Usage: bot replay --channel platform/workspace/channel
       bot replay --run RUN_ID

Fold one channel's journal and print its state as JSON, or one run's
replayed state. No model or platform is called; no key is needed.
`,
	"channels": `Usage: bot channels

List the journal's channel keys (what replay --channel and verify
--channel take), each with its command count and last activity (UTC).
No key is needed.
`,
	"memory": `Usage: bot memory rebuild --channel platform/workspace/channel | --all [--reembed] [--dry-run]

Rebuild the memory index from the journal.
  --reembed   compute every vector again with the configured embedding
              model (an error when MARLOWE_EMBEDDING_MODEL is not set)
  --dry-run   report what would change without writing
`,
	"intent": `Usage: bot intent replay FILE   (or - for stdin)

Run an intent scenario file (JSON lines) through the real filter and print
one decision per message.
`,
	"version": `Usage: bot version

Print the version.
`,
}

// wantsHelp reports whether args ask for help anywhere (bot verify --help,
// bot intent replay -h).
func wantsHelp(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" })
}

// printHelp prints cmd's usage; false when there is no such command.
func printHelp(w io.Writer, cmd string) bool {
	u, ok := commandUsage[cmd]
	if ok {
		fmt.Fprint(w, u)
	}
	return ok
}
