package main

import (
	"runtime/debug"
)

// versionString is what `bot version` prints: the version set at build
// time (-ldflags "-X main.version=v1.2.3", as the Dockerfile's VERSION
// argument does), else the module version `go install …@v1.2.3` records,
// else the commit the binary was built from (go build in a checkout).
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(version, bi)
}

func versionFrom(set string, bi *debug.BuildInfo) string {
	if set != "" && set != "dev" {
		return set
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev (built without version information)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	out := "dev-" + rev
	if modified {
		out += "-modified"
	}
	if at != "" {
		out += " (committed " + at + ")"
	}
	return out
}
