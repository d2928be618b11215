// Package engine is Marlowe's run loop: an effect interpreter over the
// journal. It owns ingress (Deliver), the driver, the run fold (ReplayRun),
// approvals and consent cards, the DM inbox, owners' reports, outage
// handling and drain. Features share one lock per channel, one plan-append
// and one mailbox per thread, which is why they are one package.
//
//	Deliver ─► router ─► journal (message.received [+ run.started]) ─► thread mailbox
//	mailbox ─► drive: ReplayRun(journal) ─► checklist ─► loop {
//	    budgets ─► recall for new messages (TurnRecaller; tool.requested/completed)
//	    ─► view ─► model ─► model.step ─► per call: validate ─► gate.Decide ─►
//	    execute | approval card + park ─► tool.completed
//	} ─► answer ─► run.completed
//
// Every step is journaled before its effect; every post carries a
// deterministic idempotency key (core.EffectID) and is recorded as
// message.posted, so a run resumed after a crash (Start) continues from its
// last journaled step and posts nothing twice. The run's state is only ever
// the fold of its commands (ReplayRun), live or in replay; the channel's is
// core/fold's Channel, advanced only by appends through the channel view.
//
// It imports core, core/gate, core/fold, core/chatcommand and replica. Only
// the composition root (cmd/bot) and tests import it: adapters, stores,
// tools and the scheduler see the engine through core's ports.
package engine
