package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/adapters/sandbox"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// doctor collects check results and prints one line each as they come.
type doctor struct {
	w      io.Writer
	json   bool
	checks []core.Check
}

func (d *doctor) add(cs ...core.Check) {
	for _, c := range cs {
		d.checks = append(d.checks, c)
		if d.json {
			continue
		}
		mark := map[core.CheckStatus]string{core.CheckOK: "✓", core.CheckWarn: "!", core.CheckFail: "✗"}[c.Status]
		line := mark + " " + c.Name
		if c.Detail != "" {
			line += ": " + c.Detail
		}
		if c.Fix != "" && c.Status != core.CheckOK {
			line += " — fix: " + c.Fix
		}
		fmt.Fprintln(d.w, line)
	}
}

func (d *doctor) failed() int {
	n := 0
	for _, c := range d.checks {
		if c.Status == core.CheckFail {
			n++
		}
	}
	return n
}

func ok(name, detail string) core.Check {
	return core.Check{Name: name, Status: core.CheckOK, Detail: detail}
}
func warn(name, detail, fix string) core.Check {
	return core.Check{Name: name, Status: core.CheckWarn, Detail: detail, Fix: fix}
}
func fail(name, detail, fix string) core.Check {
	return core.Check{Name: name, Status: core.CheckFail, Detail: detail, Fix: fix}
}

// cmdDoctor checks what serve needs — configuration, keys, store, Redis,
// the model (a real minimal call), embeddings and every configured
// platform — and prints one line per check. It changes nothing: no key is
// generated, no migration applied. Any ✗ makes it exit 1.
func cmdDoctor(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("doctor", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	asJSON := flags.Bool("json", false, "print the checks as a JSON array")
	if err := parseFlags(flags, args); err != nil {
		return usageErr("doctor: %v", err)
	}
	if flags.NArg() > 0 {
		return usageErr("doctor takes no arguments (configuration is by environment)")
	}
	d := &doctor{w: stdout, json: *asJSON}
	runDoctor(ctx, d, getenv)
	if d.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d.checks); err != nil {
			return err
		}
	}
	if n := d.failed(); n > 0 {
		return exitError{code: 1, err: fmt.Errorf("doctor: %d check(s) failed", n)}
	}
	return nil
}

func runDoctor(ctx context.Context, d *doctor, getenv func(string) string) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		d.add(fail("configuration", err.Error(), "correct the variable named above (README.md lists them; .env.example has every one)"))
		return
	}
	src := "environment"
	if p := getenv("MARLOWE_CONFIG"); p != "" {
		src = "environment over " + p
	}
	d.add(ok("configuration", fmt.Sprintf("from the %s; data dir %s, HTTP on %s, log level %s", src, cfg.DataDir, cfg.HTTPAddr, cfg.LogLevel)))
	for _, u := range unknownVars(settingNames(getenv)) {
		fix := "remove it, or correct its name (.env.example lists every setting)"
		if u.nearest != "" {
			fix = "rename it to " + u.nearest
		}
		d.add(warn("setting "+u.name, u.String(), fix))
	}

	signer := doctorKeys(d, cfg)
	j, closeJ := doctorStore(ctx, d, cfg)
	if j != nil {
		doctorSigners(ctx, d, cfg, j, signer)
		closeJ()
	}
	doctorRedis(ctx, d, cfg)
	doctorModel(ctx, d, cfg)
	doctorPlatforms(ctx, d, cfg)
	doctorSignIn(ctx, d, cfg, doctorPersonServers(cfg.Getenv))
	doctorConnectors(ctx, d, cfg.Getenv)
}

func doctorKeys(d *doctor, cfg config) *core.Signer {
	signer, src, err := readSigner(cfg)
	switch {
	case err != nil:
		d.add(fail("signing key", err.Error(), "set MARLOWE_SIGNING_KEY to the output of `bot keys generate` (base64 ed25519 seed)"))
	case signer == nil && cfg.DatabaseURL != "":
		d.add(warn("signing key", "none: serve would generate "+filepath.Join(cfg.DataDir, keyFile)+" on first start",
			"with Postgres (and with several replicas) set MARLOWE_SIGNING_KEY from `bot keys generate`, so every replica signs with the same key"))
	case signer == nil:
		d.add(ok("signing key", "none yet: serve generates "+filepath.Join(cfg.DataDir, keyFile)+" on first start"))
	default:
		d.add(ok("signing key", fmt.Sprintf("key %s from %s", signer.KeyID(), src)))
	}
	pubs, err := parsePublicKeys(cfg.VerifyKeys)
	switch {
	case err != nil:
		d.add(fail("verify keys", err.Error(), "list retired public keys only, comma-separated (`bot keys --public` prints one)"))
	case len(pubs) == 0:
		d.add(ok("verify keys", "none (MARLOWE_VERIFY_KEYS is needed only after a signing key change: docs/journal.md)"))
	default:
		ids := make([]string, len(pubs))
		for i, p := range pubs {
			ids[i] = core.KeyID(p)
		}
		d.add(ok("verify keys", "retired keys trusted: "+strings.Join(ids, ", ")))
	}
	return signer
}

// doctorStore checks the store and returns its journal, read-only, when
// it is safe to read (nil otherwise).
func doctorStore(ctx context.Context, d *doctor, cfg config) (core.Journal, func()) {
	if cfg.DatabaseURL != "" {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := strictURL("MARLOWE_DATABASE_URL", cfg.DatabaseURL); err != nil {
			d.add(fail("store", "postgres: "+err.Error(), "write it as postgres://user:password@host:5432/database, the password percent-encoded"))
			return nil, nil
		}
		where := redactDSN(cfg.DatabaseURL)
		if bad := postgres.CheckURL(cfg.DatabaseURL); bad != nil {
			d.add(fail("store", "postgres: "+bad.Detail, bad.Fix)) // the value itself may hold a password in any form
			return nil, nil
		}
		h, err := postgres.Check(cctx, cfg.DatabaseURL)
		if err != nil {
			dg := postgres.Diagnose(cfg.DatabaseURL, err)
			d.add(fail("store", "postgres "+where+": "+redactDSN(dg.Detail), dg.Fix))
			return nil, nil
		}
		detail := fmt.Sprintf("postgres %s (server %s)", where, h.Server)
		if !h.VectorAvailable {
			d.add(fail("store", detail+": the server has no pgvector extension",
				"use the pgvector/pgvector:pg17 image (docker-compose.yml does) or install pgvector for your PostgreSQL version (e.g. apt install postgresql-17-pgvector)"))
			return nil, nil
		}
		vec := "pgvector available, created by the first migration"
		if h.Vector != "" {
			vec = "pgvector " + h.Vector
		}
		if h.Pending() {
			d.add(warn("store", fmt.Sprintf("%s, %s; migrations pending (database at version %d, this build %d)", detail, vec, h.Applied, h.Known),
				"serve applies them at start; `bot migrate` applies them now"))
			return nil, nil
		}
		d.add(ok("store", fmt.Sprintf("%s, %s, migrations up to date (version %d)", detail, vec, h.Applied)))
		j, closeJ, err := openJournalReadOnly(cctx, cfg)
		if err != nil {
			d.add(fail("journal", redactDSN(err.Error()), "see the store line above"))
			return nil, nil
		}
		return j, closeJ
	}
	path := filepath.Join(cfg.DataDir, "marlowe.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := writableDir(cfg.DataDir); err != nil {
			d.add(fail("store", "sqlite "+path+": "+err.Error(), "make MARLOWE_DATA_DIR a directory this user can write (in a container: a volume owned by uid 65532)"))
			return nil, nil
		}
		d.add(ok("store", "sqlite "+path+": no journal yet, serve creates it (set MARLOWE_DATABASE_URL for PostgreSQL)"))
		return nil, nil
	}
	j, closeJ, err := openJournalReadOnly(ctx, cfg)
	if err != nil {
		d.add(fail("store", err.Error(), "check MARLOWE_DATA_DIR and the file's permissions"))
		return nil, nil
	}
	d.add(ok("store", "sqlite "+path))
	return j, closeJ
}

// writableDir reports whether dir (or, when it does not exist yet, its
// nearest existing parent) accepts a new file; it leaves nothing behind.
func writableDir(dir string) error {
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// doctorSigners is serve's start-up check of who signed each channel's
// newest command, without serve's key generation.
func doctorSigners(ctx context.Context, d *doctor, cfg config, j core.Journal, signer *core.Signer) {
	chs, err := j.Channels(ctx)
	if err != nil {
		d.add(fail("journal", err.Error(), "see the store line above"))
		return
	}
	if len(chs) == 0 {
		d.add(ok("journal", "empty"))
		return
	}
	if _, _, err := readSigner(cfg); errors.Is(err, errMalformedKey) {
		d.add(fail("journal", fmt.Sprintf("%d channel(s) of commands, not checked: MARLOWE_SIGNING_KEY is malformed (see the signing key line)", len(chs)),
			"fix MARLOWE_SIGNING_KEY as the signing key line says"))
		return
	}
	if signer == nil {
		d.add(fail("journal", fmt.Sprintf("%d channel(s) of commands, but no signing key is configured: serve would generate a new key and refuse to start", len(chs)),
			"set MARLOWE_DATA_DIR to the directory holding "+keyFile+", or MARLOWE_SIGNING_KEY to the key that signed this journal"))
		return
	}
	if _, err := checkJournalSigners(ctx, cfg, &stores{Journal: j, Signer: signer, KeySrc: "the configuration"}); err != nil {
		d.add(fail("journal", err.Error(), "add the old key's public key to MARLOWE_VERIFY_KEYS (docs/journal.md)"))
		return
	}
	d.add(ok("journal", fmt.Sprintf("%d channel(s); the newest command of each is signed by a trusted key", len(chs))))
}

func doctorRedis(ctx context.Context, d *doctor, cfg config) {
	if cfg.RedisURL == "" {
		d.add(ok("redis", "not configured: intent windows and dedupe keys live in this process (fine for one replica)"))
		return
	}
	if err := strictURL("MARLOWE_REDIS_URL", cfg.RedisURL); err != nil {
		d.add(fail("redis", err.Error(), "use redis://[user:password@]host:6379/0, the password percent-encoded"))
		return
	}
	where := redactDSN(cfg.RedisURL)
	opt, err := goredis.ParseURL(cfg.RedisURL)
	if err != nil {
		d.add(fail("redis", redisURLError(cfg.RedisURL).Error(), "use redis://[user:password@]host:6379/0, the password percent-encoded"))
		return
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(cctx).Err(); err != nil {
		d.add(fail("redis", where+": "+redactDSN(err.Error()), "is Redis running and reachable? check MARLOWE_REDIS_URL"))
		return
	}
	d.add(ok("redis", where+" answers"))
}

func doctorModel(ctx context.Context, d *doctor, cfg config) {
	_, _, info, err := llm.FromEnv(cfg.Getenv, llm.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		d.add(fail("model", err.Error(), ".env.example explains each model variable; docs/troubleshooting.md → The model"))
		return
	}
	if !info.Configured {
		d.add(warn("model", "none configured: the bot answers only the offline command grammar (mention it with `help` for the list)",
			"MARLOWE_MODEL_PROVIDER=openai MARLOWE_MODEL=<name> MARLOWE_MODEL_BASE_URL=<OpenAI-compatible URL ending in /v1> [OPENAI_API_KEY=...]"))
	}
	// Longer than one call's timeout is not useful; a minute at most.
	cctx, cancel := context.WithTimeout(ctx, min(info.Timeout+5*time.Second, time.Minute))
	defer cancel()
	results, err := llm.ProbeEnv(cctx, cfg.Getenv)
	if err != nil {
		d.add(fail("model", err.Error(), ""))
		return
	}
	for _, r := range results {
		d.add(probeCheck(r))
	}
	if info.Embedding == nil {
		d.add(ok("embeddings", "not configured: memory recall is lexical only (MARLOWE_EMBEDDING_MODEL turns on semantic recall)"))
	}
}

// probeCheck turns one probe into a doctor line.
func probeCheck(r llm.ProbeResult) core.Check {
	name := r.Role
	what := fmt.Sprintf("%s %s at %s", r.Endpoint.Provider, r.Endpoint.Model, r.URL)
	if r.OK() {
		return ok(name, fmt.Sprintf("%s %s in %s", what, r.Answer, r.Elapsed.Round(time.Millisecond)))
	}
	if me, isME := core.AsModelError(r.Err); isME {
		detail := fmt.Sprintf("%s: %s", what, me.Failure)
		if me.Status != 0 {
			detail += fmt.Sprintf(" (HTTP %d)", me.Status)
		}
		detail += ": " + redactDSN(me.Err.Error())
		return fail(name, detail, me.Hint)
	}
	return fail(name, what+": "+redactDSN(r.Err.Error()), "")
}

// doctorPlatforms builds the surfaces serve would run and asks each that
// can check itself (core.Doctor) to do so.
func doctorPlatforms(ctx context.Context, d *doctor, cfg config) {
	set, err := newPlatforms(cfg, nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		d.add(platformFailure(err))
		return
	}
	switch {
	case len(set.byName) == 0:
		d.add(ok("sandbox", "on: no platform is configured, so serve opens the sandbox web surface at "+browseURL(sandboxAddr(cfg))))
	case cfg.Getenv("MARLOWE_SANDBOX") == "1":
		d.add(ok("sandbox", "on alongside the platforms (MARLOWE_SANDBOX=1) at "+browseURL(sandboxAddr(cfg))))
	}
	for _, name := range slices.Sorted(maps.Keys(set.byName)) {
		s := set.byName[name]
		doc, isDoctor := s.(core.Doctor)
		if !isDoctor {
			d.add(ok(name, "configured (this surface has no live checks)"))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		d.add(doc.Doctor(cctx)...)
		cancel()
	}
}

func sandboxAddr(cfg config) string {
	if a := cfg.Getenv("MARLOWE_SANDBOX_ADDR"); a != "" {
		return a
	}
	return sandbox.DefaultAddr
}

// platformGuides are each platform's step-by-step settings guide.
var platformGuides = map[string]string{
	"slack":    "docs/slack.md walks through the Slack settings",
	"discord":  "docs/discord.md walks through the Discord settings",
	"telegram": "docs/telegram.md walks through the Telegram settings",
}

// platformFailure is a platform's configuration error as one line, its
// prefix once ("telegram configuration: telegram config: …" is said as
// "telegram configuration: …"), with that platform's guide as the fix.
func platformFailure(err error) core.Check {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	name, _, _ := strings.Cut(msg, " ")
	name = strings.TrimSuffix(name, ":")
	for _, outer := range []string{name + " configuration: ", name + ": "} {
		if strings.HasPrefix(msg, outer) {
			msg = outer + strings.TrimPrefix(strings.TrimPrefix(msg, outer), name+" config: ")
			break
		}
	}
	fix, known := platformGuides[name]
	if !known {
		fix = "README.md → Configuration lists each platform's variables"
	}
	return fail("platforms", msg, fix)
}
