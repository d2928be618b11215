package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestComposePublishesOnLoopbackOnly: every port docker-compose.yml
// publishes is bound to the host's 127.0.0.1 (the sandbox has no login;
// metrics are not for the internet).
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	f, err := os.Open("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inPorts, indent, seen := false, 0, 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		lead := len(line) - len(strings.TrimLeft(line, " "))
		if inPorts && lead <= indent {
			inPorts = false
		}
		if trim == "ports:" {
			inPorts, indent = true, lead
			continue
		}
		if inPorts {
			item := strings.Trim(strings.TrimSpace(strings.TrimPrefix(trim, "-")), `"'`)
			seen++
			if !strings.HasPrefix(item, "127.0.0.1:") {
				t.Errorf("docker-compose.yml:%d publishes %q beyond the host's loopback", n, item)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no published ports found: the parser no longer matches the file")
	}
}
