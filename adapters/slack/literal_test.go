package slack

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// No mention-shaped literal may live in source, docs or prompts: the bot's
// user id and handle are per workspace and resolved live (auth.test). A
// hard-coded <@U…> or "@marlowe" would address the wrong account — or a
// look-alike someone registered first.
func TestNoMentionLiteralsInRepository(t *testing.T) {
	root := repoRoot(t)
	patterns := []*regexp.Regexp{
		regexp.MustCompile(`<@[UW][A-Z0-9]{6,}(\|[^>]*)?>`),
		regexp.MustCompile(`(^|[^A-Za-z0-9_.])@marlowe\b`),
	}
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		scan := false
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".md"),
			strings.HasSuffix(name, ".prompt"), strings.HasSuffix(name, ".tmpl"), strings.HasSuffix(name, ".tpl"):
			scan = true
		case strings.Contains(filepath.ToSlash(path), "/prompts/"):
			scan = true
		}
		if !scan {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, re := range patterns {
				if re.MatchString(line) {
					rel, _ := filepath.Rel(root, path)
					bad = append(bad, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("mention-shaped literals (resolve the bot's id and handle live instead):\n%s", strings.Join(bad, "\n"))
	}
}

// The scan itself catches what it should.
func TestMentionLiteralPatterns(t *testing.T) {
	re1 := regexp.MustCompile(`<@[UW][A-Z0-9]{6,}(\|[^>]*)?>`)
	re2 := regexp.MustCompile(`(^|[^A-Za-z0-9_.])@marlowe\b`)
	for _, s := range []string{"say <@U012ABCDEF> hi", "<@W0123456|bot>"} {
		if !re1.MatchString(s) {
			t.Errorf("missed %q", s)
		}
	}
	for _, s := range []string{"ask @marlowe", "@marlowe, please"} {
		if !re2.MatchString(s) {
			t.Errorf("missed %q", s)
		}
	}
	for _, s := range []string{"github.com/marlowe-bot/marlowe", "git@marlowe-bot.example", "<@\" + id + \">", "maintainers@marlowe.dev"} {
		if re1.MatchString(s) || re2.MatchString(s) {
			t.Errorf("false positive %q", s)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
