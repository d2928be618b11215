// Package replica keeps the books of running several replicas on one
// journal (ARCHITECTURE.md section 9): which channels this replica drives,
// under which lease fences and until when (Ownership), and single-holder
// elections on the same lease table (Elector: the one Telegram poller, the
// one routine scheduler).
//
// It imports only core. It never imports the engine, the stores or the
// adapters: the engine decides what a fresh claim resumes and what a lost
// lease stops; the stores implement core.Leases.
package replica
