package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// The listen addresses as a newcomer gets them wrong: a bare port, a port
// another Marlowe holds (the HTTP one, or the sandbox's, which must fail
// before the engine starts), each answered with the variable and the fix;
// and the URLs printed are ones a browser on this machine can open.
func TestListenAddressMistakes(t *testing.T) {
	held := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().String()
	}
	for _, c := range []struct {
		name    string
		env     map[string]string
		want    []string
		notLogs string
	}{
		{"bare HTTP port", map[string]string{"MARLOWE_HTTP_ADDR": "8081"},
			[]string{"MARLOWE_HTTP_ADDR=8081 is a port without a host", "MARLOWE_HTTP_ADDR=127.0.0.1:8081", "MARLOWE_HTTP_ADDR=:8081"}, ""},
		{"bare sandbox port", map[string]string{"MARLOWE_SANDBOX_ADDR": "8080"},
			[]string{"MARLOWE_SANDBOX_ADDR=8080 is a port without a host", "MARLOWE_SANDBOX_ADDR=127.0.0.1:8080"}, ""},
		{"HTTP port in use", map[string]string{"MARLOWE_HTTP_ADDR": held()},
			[]string{"MARLOWE_HTTP_ADDR=127.0.0.1:", "already in use", "another Marlowe is running"}, "engine started"},
		{"sandbox port in use", map[string]string{"MARLOWE_HTTP_ADDR": "127.0.0.1:0", "MARLOWE_SANDBOX_ADDR": held()},
			[]string{"MARLOWE_SANDBOX_ADDR=127.0.0.1:", "already in use", "another Marlowe is running"}, "engine started"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env["MARLOWE_DATA_DIR"] = t.TempDir()
			var out, logs bytes.Buffer
			err := run(t.Context(), []string{"serve"}, env(c.env), strings.NewReader(""), &out, &logs)
			if err == nil {
				t.Fatal("serve started")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if c.notLogs != "" && strings.Contains(logs.String(), c.notLogs) {
				t.Errorf("logged %q before failing:\n%s", c.notLogs, logs.String())
			}
		})
	}
}

func TestURLsToOpenAreReachable(t *testing.T) {
	for addr, want := range map[string]string{
		":8081": "http://localhost:8081", "0.0.0.0:8080": "http://localhost:8080", "[::]:8080": "http://localhost:8080",
		"127.0.0.1:8081": "http://127.0.0.1:8081", "bot.internal:80": "http://bot.internal:80",
	} {
		if got := browseURL(addr); got != want {
			t.Errorf("browseURL(%q) = %q, want %q", addr, got, want)
		}
	}
	// compose sets MARLOWE_HTTP_ADDR=:8081 and publishes it on the host's
	// loopback: export links default to that, not to nothing.
	cfg, err := loadConfig(env(map[string]string{"MARLOWE_HTTP_ADDR": ":8081"}))
	if err != nil || cfg.PublicURL != "http://localhost:8081" {
		t.Errorf("public URL for :8081 = %q (%v)", cfg.PublicURL, err)
	}
	out, _ := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_SANDBOX_ADDR": "0.0.0.0:8080"}), "", "doctor")
	if !strings.Contains(out, "sandbox web surface at http://localhost:8080") || strings.Contains(out, "0.0.0.0") {
		t.Errorf("doctor's sandbox line:\n%s", out)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, c := range []struct {
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"v1.4.0", vcs(), "v1.4.0"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.3.2"}}, "v1.3.2"},
		{"dev", vcs("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "true"), "dev-0123456789ab-modified (committed 2026-12-01T10:00:00Z)"},
		{"dev", vcs(), "dev (built without version information)"},
	} {
		if got := versionFrom(c.set, c.bi); got != c.want {
			t.Errorf("versionFrom(%q, …) = %q, want %q", c.set, got, c.want)
		}
	}
	// What `go test` builds carries build info too: never the bare "dev".
	if out, err := runBot(t, env(nil), "", "version"); err != nil || strings.TrimSpace(out) == "marlowe dev" {
		t.Errorf("bot version = %q (%v)", out, err)
	}
}

// A flag a subcommand does not have: one line naming the flags there are,
// not the flag package's raw error and usage dump.
func TestUnknownFlagIsOneClearLine(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"channels", "--all"}, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir()}), strings.NewReader(""), &out, &errOut)
	if err == nil || err.Error() != "channels: unknown flag --all (it takes no flags)" || errOut.Len() != 0 {
		t.Errorf("channels --all: %v; stderr %q", err, errOut.String())
	}
	err = run(t.Context(), []string{"verify", "--bogus"}, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir()}), strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "unknown flag --bogus (its flags: --channel)") {
		t.Errorf("verify --bogus: %v", err)
	}
}

// A misspelled MARLOWE_ variable is not ignored in silence: serve's log
// and doctor name it, with the nearest known name.
func TestUnknownSettingsAreNamed(t *testing.T) {
	t.Setenv("MARLOWE_MODLE", "llama3")
	t.Setenv("MARLOWE_SANBOX_ADDR", "127.0.0.1:9")
	t.Setenv("MARLOWE_TEST_ANYTHING", "x") // the suite's own, not a setting
	got := unknownVars(settingNames(env(nil)))
	if len(got) != 2 || got[0].String() != "MARLOWE_MODLE is not a Marlowe setting and is ignored: did you mean MARLOWE_MODEL?" ||
		got[1].nearest != "MARLOWE_SANDBOX_ADDR" {
		t.Fatalf("unknown = %v", got)
	}
	out, _ := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir()}), "", "doctor")
	if !strings.Contains(out, "MARLOWE_MODLE is not a Marlowe setting") || !strings.Contains(out, "rename it to MARLOWE_MODEL") {
		t.Errorf("doctor:\n%s", out)
	}
	var logs bytes.Buffer
	_ = run(t.Context(), []string{"serve"}, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_MODEL_PROVIDER": "bogus"}), strings.NewReader(""), &bytes.Buffer{}, &logs)
	if !strings.Contains(logs.String(), "did you mean MARLOWE_MODEL?") {
		t.Errorf("serve's log:\n%s", logs.String())
	}
}

// `bot memory rebuild` says each channel's result once (the report, not
// the report and a log line), and does not call vectors missing when no
// embedding model is configured.
func TestMemoryRebuildSaysEachResultOnce(t *testing.T) {
	dir := t.TempDir()
	ch := seedJournal(t, dir, 2)
	var out, logs bytes.Buffer
	if err := run(t.Context(), []string{"memory", "rebuild", "--all"}, env(map[string]string{"MARLOWE_DATA_DIR": dir}), strings.NewReader(""), &out, &logs); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String()+logs.String(), string(ch)); n != 1 {
		t.Errorf("the channel is reported %d times:\n%s%s", n, out.String(), logs.String())
	}
	if strings.Contains(out.String(), "missing") || !strings.Contains(out.String(), "no embedding model") {
		t.Errorf("report: %s", out.String())
	}
}

// A Redis that is down is one ✗ line in doctor, with the fix, not four
// raw connection-pool log lines before it (the built binary: the library
// logs to the process's stderr).
func TestDoctorWithRedisDownIsQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built binary (-short skips it)")
	}
	bin := buildCrashBot(t)
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	cmd := exec.CommandContext(t.Context(), bin, "doctor")
	cmd.Env = []string{"HOME=" + t.TempDir(), "MARLOWE_DATA_DIR=" + t.TempDir(), "MARLOWE_REDIS_URL=redis://" + dead + "/0"}
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "pool.go") || strings.Contains(string(out), "connection pool") || !strings.Contains(string(out), "✗ redis:") {
		t.Errorf("doctor with Redis down:\n%s", out)
	}
}

// The start-up log gives the sandbox's URL once, as a browser here opens
// it (bound on every interface: localhost, never [::] or 0.0.0.0), and
// no empty replica="".
func TestStartupLogSaysTheURLOnce(t *testing.T) {
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve"}, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_HTTP_ADDR": ":0", "MARLOWE_SANDBOX_ADDR": "0.0.0.0:0"}),
			strings.NewReader(""), io.Discard, logs)
	}()
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), "routines scheduler running"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s", logs.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	out := logs.String()
	m := regexp.MustCompile(`sandbox ready.* url=(\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(m[1], "http://localhost:") {
		t.Fatalf("no localhost sandbox URL in:\n%s", out)
	}
	if n := strings.Count(out, m[1]); n != 1 {
		t.Errorf("the sandbox URL is logged %d times:\n%s", n, out)
	}
	if strings.Contains(out, `replica=""`) {
		t.Errorf("the log has an empty replica:\n%s", out)
	}
	// URLs to open (the warning about the bind address may name it).
	if bad := regexp.MustCompile(`=http://(\[::\]|0\.0\.0\.0)`).FindString(out); bad != "" {
		t.Errorf("the log offers %s to open:\n%s", bad, out)
	}
}
