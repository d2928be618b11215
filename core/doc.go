// Package core holds Marlowe's domain types and ports (Command, Journal,
// Surface, Model, Tool, Policy), the fold, and the run loop.
//
// The run loop (Engine) is an effect interpreter over the journal:
//
//	Deliver ─► router ─► journal (message.received [+ run.started]) ─► thread mailbox
//	mailbox ─► drive: ReplayRun(journal) ─► checklist ─► loop {
//	    budgets ─► recall for new messages (TurnRecaller; tool.requested/completed)
//	    ─► view ─► model ─► model.step ─► per call: validate ─► Gate ─►
//	    execute | approval card + park ─► tool.completed
//	} ─► answer ─► run.completed
//
// Every step is journaled before its effect; every post carries a
// deterministic idempotency key (EffectID) and is recorded as
// message.posted, so a run resumed after a crash (Start) continues from its
// last journaled step and posts nothing twice. The run's state is only ever
// the fold of its commands (ReplayRun), live or in replay.
package core
