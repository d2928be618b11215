// Package mcpservers finds, for tests, the npm packages that
// scripts/install-mcp-servers installs (pinned by scripts/npm's lockfile):
// the reference MCP servers and oidc-provider.
package mcpservers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Entry returns the entry point (dist/index.js) of the reference server
// pkg, such as "server-filesystem", from $MARLOWE_MCP_SERVERS_DIR or else
// the module's .cache/mcp-servers. Without it, or without node on PATH,
// the test skips, or fails under MARLOWE_REQUIRE_SERVICES=1.
func Entry(t testing.TB, pkg string) string {
	t.Helper()
	return filepath.Join(Module(t, filepath.Join("@modelcontextprotocol", pkg)), "dist", "index.js")
}

// Module returns the directory of the npm package name (such as
// "oidc-provider") that scripts/install-mcp-servers installs, from
// $MARLOWE_MCP_SERVERS_DIR or else the module's .cache/mcp-servers.
// Without it, or without node on PATH, the test skips, or fails under
// MARLOWE_REQUIRE_SERVICES=1.
func Module(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("MARLOWE_MCP_SERVERS_DIR")
	if dir == "" {
		dir = filepath.Join(moduleRoot(), ".cache", "mcp-servers")
	}
	mod := filepath.Join(dir, "node_modules", name)
	_, err := os.Stat(filepath.Join(mod, "package.json"))
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		msg := fmt.Sprintf("npm package %s not installed in %s (run scripts/install-mcp-servers; needs node on PATH)", name, dir)
		if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return mod
}

// moduleRoot is the nearest directory above the test's working directory
// (its package) that holds go.mod, or "." when there is none.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}
