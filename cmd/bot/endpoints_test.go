package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// routesIn returns the HTTP paths registered in the non-test Go files of
// dirs (mux.Handle / mux.HandleFunc patterns, with or without a method),
// resolving the one concatenated pattern (Telegram's WebhookPath).
func routesIn(t *testing.T, dirs ...string) []string {
	t.Helper()
	reRoute := regexp.MustCompile(`Handle(?:Func)?\("(?:[A-Z]+ )?(/[^"{]*)"`)
	reConst := regexp.MustCompile(`Handle(?:Func)?\("(?:[A-Z]+ )?"\s*\+\s*(\w+)`)
	var out []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			for _, m := range reRoute.FindAllStringSubmatch(src, -1) {
				out = append(out, m[1])
			}
			for _, m := range reConst.FindAllStringSubmatch(src, -1) {
				c := regexp.MustCompile(m[1] + `\s*=\s*"([^"]+)"`).FindStringSubmatch(src)
				if c == nil {
					t.Fatalf("%s: route constant %s not found", f, m[1])
				}
				out = append(out, c[1])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestServeHelpNamesEveryEndpoint reads the routes serve's HTTP server and
// the platform adapters register, and the checks /readyz prints, and
// requires `bot serve --help` to name every one (and docs/operations.md
// every /readyz line), so a new endpoint cannot go undocumented.
func TestServeHelpNamesEveryEndpoint(t *testing.T) {
	routes := routesIn(t, ".", "../../adapters/slack", "../../adapters/discord", "../../adapters/telegram")
	help, err := runBot(t, env(nil), "", "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	var named int
	for _, r := range routes {
		if strings.HasSuffix(r, "/") && r != "/" {
			continue // a mount of an adapter's handler: its own routes are listed
		}
		named++
		if !strings.Contains(help, r) {
			t.Errorf("serve --help does not name %s:\n%s", r, help)
		}
	}
	if named < 7 {
		t.Fatalf("found only %d routes (%v): the scan is broken", named, routes)
	}

	var checks []string
	reCheck := regexp.MustCompile(`readyCheck\{\{?(?:name: )?"(\w+)"`)
	for _, f := range []string{"serve.go", "ready.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reCheck.FindAllStringSubmatch(string(b), -1) {
			checks = append(checks, m[1])
		}
	}
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) < 4 {
		t.Fatalf("found only /readyz checks %v: the scan is broken", checks)
	}
	for _, c := range checks {
		if !strings.Contains(help, c) {
			t.Errorf("serve --help does not name the /readyz check %q", c)
		}
		if !strings.Contains(string(ops), "`"+c+"`") {
			t.Errorf("docs/operations.md does not document the /readyz line %q", c)
		}
	}
}

// TestComposeCommentPointsAtRealDocs: every docs/*.md the compose file's
// comments name exists, and so does every section they quote ("What is
// tested"), so the pointers cannot go stale again.
func TestComposeCommentPointsAtRealDocs(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var comments strings.Builder
	for line := range strings.Lines(string(b)) {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
			comments.WriteString(c)
		}
	}
	docs := regexp.MustCompile(`docs/[\w.-]+\.md`).FindAllString(comments.String(), -1)
	if len(docs) == 0 {
		t.Fatal("the compose comments name no docs: the scan is broken")
	}
	var all strings.Builder
	for _, d := range docs {
		md, err := os.ReadFile(filepath.Join("../..", d))
		if err != nil {
			t.Errorf("docker-compose.yml points at %s: %v", d, err)
			continue
		}
		all.Write(md)
	}
	for _, m := range regexp.MustCompile(`"([A-Z][^"]+)"`).FindAllStringSubmatch(comments.String(), -1) {
		if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(m[1]) + `\s*$`).MatchString(all.String()) {
			t.Errorf("docker-compose.yml quotes a section %q that none of %v has", m[1], docs)
		}
	}
}
