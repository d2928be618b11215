// Package gate decides what a tool call may do: the tool registry (which
// tools exist and which a channel exposes), each tool's argument schema,
// the canonical arguments the tool will run with, and Decide, which judges
// consequence and destination on exactly those arguments against the
// channel's policy. The model never decides: it only proposes calls.
//
// It imports only core. It never imports the engine, the fold or the
// adapters.
package gate
