package engine

import "github.com/marlowe-bot/marlowe/core"

// inDoubtMessage is what a call interrupted by a restart completes with
// when it is not sent again.
const inDoubtMessage = "the bot restarted while this action was running; its outcome is unknown and it was not sent again — check whether it happened before trying again, and tell the person"

// notRepeatable reports whether a call interrupted by a restart (its
// outcome unknown) must not be sent again: an irreversible tool, and a
// connector's tool unless it is read-only or declares itself idempotent.
// Built-in writes are safe to repeat: their effects carry the call's
// deterministic key. A remote server's are not.
func notRepeatable(t core.Tool) bool {
	if t.Consequence == core.Irreversible {
		return true
	}
	return t.Connector != nil && t.Consequence != core.Read && !t.Connector.Idempotent
}
