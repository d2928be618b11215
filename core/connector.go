package core

import "regexp"

// ToolOrigin marks a tool that comes from a connector (an MCP server)
// rather than the binary. The gate judges such a tool like any other, on
// its declared Consequence; the engine uses the origin only to decide
// whether a call interrupted by a crash may be sent again.
type ToolOrigin struct {
	Server string // the configured server name
	Tool   string // the server's own name for the tool
	// Definition is a stable hash of the tool's name, annotations and
	// input schema: a change means the server changed what the tool is.
	Definition string
	// Idempotent: the server declares that repeating a call has no further
	// effect (idempotentHint), so a call in doubt may be re-sent.
	Idempotent bool
}

// ToolSource offers tools that appear, change and disappear while the
// process runs (connectors). The registry consults it after its built-in
// tools; the engine never knows where a tool came from.
type ToolSource interface {
	// ToolsIn lists the tools offered in channel ch, in a stable order.
	ToolsIn(ch ChannelKey) []Tool
	// Tool returns the tool named name, wherever it is offered.
	Tool(name string) (Tool, bool)
}

// connectorToolName is wider than a built-in's name: server and tool names
// keep their case and dashes (`github__create-issue`).
var connectorToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
