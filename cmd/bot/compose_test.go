package main

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	EnvFile     any               `yaml:"env_file"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	ExtraHosts  []string          `yaml:"extra_hosts"`
	Volumes     []string          `yaml:"volumes"`
	Profiles    []string          `yaml:"profiles"`
	Command     []string          `yaml:"command"`
	StopGrace   string            `yaml:"stop_grace_period"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestComposePublishesOnLoopbackOnly: every port docker-compose.yml
// publishes is bound to the host's 127.0.0.1 (the sandbox has no login;
// metrics are not for the internet).
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	seen := 0
	for name, s := range readCompose(t).Services {
		for _, p := range s.Ports {
			seen++
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond the host's loopback", name, p)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no published ports found")
	}
}

// TestComposeBotService: the bot takes all of .env (env_file), checks its
// own readiness with the binary (distroless has no curl), and reaches a
// model on the host as host.docker.internal.
func TestComposeBotService(t *testing.T) {
	bot, ok := readCompose(t).Services["bot"]
	if !ok {
		t.Fatal("no bot service")
	}
	var files []string
	switch v := bot.EnvFile.(type) {
	case string:
		files = []string{v}
	case []any:
		for _, f := range v {
			if s, ok := f.(string); ok {
				files = append(files, s)
			}
		}
	}
	if !slices.Contains(files, ".env") {
		t.Errorf("env_file = %v, want .env", bot.EnvFile)
	}
	if !slices.Equal(bot.Healthcheck.Test, []string{"CMD", "/bot", "healthcheck"}) {
		t.Errorf("healthcheck = %v, want [CMD /bot healthcheck]", bot.Healthcheck.Test)
	}
	if !slices.Contains(bot.ExtraHosts, "host.docker.internal:host-gateway") {
		t.Errorf("extra_hosts = %v, want host.docker.internal:host-gateway", bot.ExtraHosts)
	}
	// Each wiring variable can be overridden from .env: ${VAR:-default}.
	for k, v := range bot.Environment {
		if !strings.HasPrefix(v, "${"+k+":-") {
			t.Errorf("environment %s=%q hides .env's value (want ${%s:-default})", k, v, k)
		}
	}
	// The healthcheck asks MARLOWE_HTTP_ADDR, which must be the published port.
	addr := strings.TrimSuffix(strings.TrimPrefix(bot.Environment["MARLOWE_HTTP_ADDR"], "${MARLOWE_HTTP_ADDR:-"), "}")
	if _, err := readyURL(addr); err != nil || !slices.Contains(bot.Ports, "127.0.0.1:8081"+addr) {
		t.Errorf("MARLOWE_HTTP_ADDR default %q is not the published 8081 (%v)", addr, err)
	}
	// `export my data` links under compose: the published port, as this
	// host reaches it; .env.example says the same.
	if got := bot.Environment["MARLOWE_PUBLIC_URL"]; got != "${MARLOWE_PUBLIC_URL:-http://localhost:8081}" {
		t.Errorf("MARLOWE_PUBLIC_URL = %q, want the published port on localhost", got)
	}
	if ex, err := os.ReadFile("../../.env.example"); err != nil || !regexp.MustCompile(`(?m)^MARLOWE_PUBLIC_URL=http://localhost:8081$`).Match(ex) {
		t.Errorf(".env.example does not set MARLOWE_PUBLIC_URL=http://localhost:8081 (%v)", err)
	}
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), `ENTRYPOINT ["/bot"]`) || !strings.Contains(string(df), "COPY --from=build /bot /bot") {
		t.Error("the image no longer has /bot, which the healthcheck runs")
	}
}

// envName matches a configuration variable named in Go source.
var envName = regexp.MustCompile(`"((?:MARLOWE|SLACK|DISCORD|TELEGRAM|OPENAI|ANTHROPIC)_[A-Z0-9_]+)"`)

// testOnlyVar: the suite's and the scripts' own names, which are not
// settings (the same rule start-up uses).
func testOnlyVar(v string) bool { return testOnlyVarName(v) }

// TestEnvExampleListsEveryVariable: every variable the bot's code names
// (outside tests) appears in .env.example, so a new setting cannot ship
// undocumented, and with env_file it works under compose.
func TestEnvExampleListsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if k, _, ok := strings.Cut(line, "="); ok && regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`).MatchString(strings.TrimSpace(k)) {
			listed[strings.TrimSpace(k)] = true
		}
	}
	found := map[string]string{}
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range envName.FindAllStringSubmatch(string(src), -1) {
			found[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Composed in code from a base name and a suffix.
	for _, v := range []string{"MARLOWE_MODEL_PROVIDER_FALLBACK", "MARLOWE_MODEL_FALLBACK", "MARLOWE_MODEL_BASE_URL_FALLBACK", "OPENAI_API_KEY_FALLBACK", "ANTHROPIC_API_KEY_FALLBACK"} {
		found[v] = "llm/llm.go"
	}
	if len(found) < 20 {
		t.Fatalf("found only %d variables: the scan no longer matches the code", len(found))
	}
	for v, path := range found {
		if !testOnlyVar(v) && !listed[v] {
			t.Errorf("%s (read in %s) is not in .env.example", v, path)
		}
	}
	// Start-up and doctor warn about any other MARLOWE_ name (knownVars).
	for v, path := range found {
		if strings.HasPrefix(v, "MARLOWE_") && !testOnlyVar(v) && !slices.Contains(knownVars, v) {
			t.Errorf("%s (read in %s) is not in knownVars (envcheck.go): serve would call it unknown", v, path)
		}
	}
	for v := range listed {
		if strings.HasPrefix(v, "MARLOWE_") && !slices.Contains(knownVars, v) {
			t.Errorf("%s (in .env.example) is not in knownVars (envcheck.go): serve would call it unknown", v)
		}
	}
}

// TestComposeTwoReplicas: the "replicas" profile adds bot2, the bot's
// twin (the same build, healthcheck, .env and wiring, so the same database
// and Redis) with its own data volume and host ports that clash with
// nothing, and both replicas get longer than the drain timeout to stop.
func TestComposeTwoReplicas(t *testing.T) {
	c := readCompose(t)
	bot, ok1 := c.Services["bot"]
	bot2, ok2 := c.Services["bot2"]
	if !ok1 || !ok2 {
		t.Fatalf("services bot and bot2 are needed (found %v)", slices.Sorted(maps.Keys(c.Services)))
	}
	if len(bot.Profiles) != 0 {
		t.Errorf("bot has profiles %v: plain `docker compose up` must start it", bot.Profiles)
	}
	if !slices.Contains(bot2.Profiles, "replicas") {
		t.Errorf("bot2 profiles = %v, want replicas (one replica unless asked)", bot2.Profiles)
	}
	if !maps.Equal(bot.Environment, bot2.Environment) || !slices.Equal(bot.Healthcheck.Test, bot2.Healthcheck.Test) || bot2.EnvFile == nil {
		t.Errorf("bot2's wiring differs from bot's:\n%v\n%v", bot.Environment, bot2.Environment)
	}
	hostPort := func(p string) string { // "127.0.0.1:8081:8081" -> "127.0.0.1:8081"
		i := strings.LastIndexByte(p, ':')
		return p[:i]
	}
	seen := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if other, dup := seen[hostPort(p)]; dup {
				t.Errorf("%s and %s both publish %s", other, name, hostPort(p))
			}
			seen[hostPort(p)] = name
		}
	}
	// bot2 publishes its own HTTP port (what its healthcheck asks inside).
	addr := strings.TrimSuffix(strings.TrimPrefix(bot2.Environment["MARLOWE_HTTP_ADDR"], "${MARLOWE_HTTP_ADDR:-"), "}")
	_, port, _ := strings.Cut(addr, ":")
	if !slices.ContainsFunc(bot2.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
		t.Errorf("bot2 does not publish its HTTP port %s: %v", port, bot2.Ports)
	}
	vol := func(s composeService) string {
		for _, v := range s.Volumes {
			if name, dst, _ := strings.Cut(v, ":"); dst == "/data" {
				return name
			}
		}
		return ""
	}
	if vol(bot) == "" || vol(bot2) == "" || vol(bot) == vol(bot2) {
		t.Errorf("data volumes: bot %q, bot2 %q; want one each (the key file and sandbox messages are per process)", vol(bot), vol(bot2))
	}
	if _, ok := c.Volumes[vol(bot2)]; !ok {
		t.Errorf("volume %q is not declared", vol(bot2))
	}
	for name, s := range map[string]composeService{"bot": bot, "bot2": bot2} {
		d, err := time.ParseDuration(s.StopGrace)
		if err != nil || d <= defaultDrainTimeout {
			t.Errorf("%s stop_grace_period = %q, want longer than the %s drain", name, s.StopGrace, defaultDrainTimeout)
		}
	}
}
