// Package fold is the one fold of a channel's journal: every derived fact
// about a channel (policy, consents, approvals, runs, memories, routines
// and their firings, owners' reports, token use, delivered message ids,
// thread history) comes from Channel.Apply. The engine's channel view holds
// a Channel and advances it with each append; Fold builds one from a whole
// journal for `bot replay`, and Routines the routines' state for the
// scheduler. One switch means the engine, the replay and the scheduler
// cannot disagree about what a command means.
//
// It imports only core. Readers get accessors and iterators; only Apply
// changes a Channel.
package fold
