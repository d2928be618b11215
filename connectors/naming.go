package connectors

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/marlowe-bot/marlowe/core"
)

// MaxToolName is the longest tool name model APIs accept.
const MaxToolName = 64

// ToolName is the name the model, policies and cards use for a server's
// tool: `<server>__<tool>`, every character outside [A-Za-z0-9_-] replaced
// by '_'. A name past 64 characters is cut and ends in a short hash of the
// full name, so two long names that share a prefix stay apart.
func ToolName(server, tool string) string {
	full := sanitize(server) + "__" + sanitize(tool)
	if len(full) <= MaxToolName {
		return full
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:])[:8]
	return full[:MaxToolName-len(suffix)] + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// Consequence is the gate's level for a tool, from its annotations, never
// from its description or the model:
//
//	readOnlyHint            → read
//	destructiveHint: false  → write
//	anything else           → irreversible (no annotations included)
//	openWorldHint, not read → at least send
//
// An operator override (the server's "consequences") wins, up or down.
func Consequence(a *mcp.ToolAnnotations, override core.Consequence) core.Consequence {
	if override.Valid() {
		return override
	}
	if a == nil {
		return core.Irreversible
	}
	if a.ReadOnlyHint {
		return core.Read
	}
	c := core.Irreversible
	if a.DestructiveHint != nil && !*a.DestructiveHint {
		c = core.Write
	}
	if a.OpenWorldHint != nil && *a.OpenWorldHint && c == core.Write {
		c = core.Send
	}
	return c
}

// Definition hashes what a tool is: its name, annotations and input
// schema (canonical JSON). A server that changes any of them changes it.
func Definition(t *mcp.Tool) string {
	canon := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		var x any
		if json.Unmarshal(b, &x) != nil {
			return string(b)
		}
		b, _ = json.Marshal(x) // map keys sorted
		return string(b)
	}
	// The hints are copied into a struct of ours: the SDK's own encoding of
	// annotations depends on a setting, and the pin must not.
	var hints any
	if a := t.Annotations; a != nil {
		hints = struct {
			ReadOnly, Idempotent   bool
			Destructive, OpenWorld *bool
			Title                  string
		}{a.ReadOnlyHint, a.IdempotentHint, a.DestructiveHint, a.OpenWorldHint, a.Title}
	}
	h := sha256.New()
	h.Write([]byte(t.Name))
	h.Write([]byte{0})
	h.Write([]byte(canon(hints)))
	h.Write([]byte{0})
	h.Write([]byte(canon(t.InputSchema)))
	return hex.EncodeToString(h.Sum(nil))[:32]
}
