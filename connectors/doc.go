// Package connectors makes MCP servers Marlowe's tools: it reads the
// MARLOWE_MCP_CONFIG file (the mcpServers shape other hosts use), runs or
// dials each server with github.com/modelcontextprotocol/go-sdk, and offers
// their tools to the registry through core.ToolSource, named
// `<server>__<tool>` and with a consequence derived from annotations and
// operator overrides, never from descriptions.
//
// It imports core and the SDK only; cmd/bot wires it. It must never import
// engine, an adapter or a store.
package connectors
