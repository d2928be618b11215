// Package chatcommand parses the chat grammar: what a person typed to the
// bot (help, remember, memories, policy, status, cancel, approvals), the
// routine commands (routine add|edit|pause|resume|delete|run, routines),
// the inbox commands (inbox, consents, consent revoke), policy edits and
// the help texts. It only reads text and describes policies; the engine
// executes what it parses.
//
// It imports core and core/gate (tool names for policy edits). It never
// imports the engine or the fold.
package chatcommand
