// Package core is Marlowe's domain: the signed Command and its payloads
// and kinds, the Boundary that alone mints drafts (actor stamped at the
// edge), the Journal and Leases ports with chain verification, Scope and
// channel keys, Policy, and the ports the engine is used through by
// adapters, stores, tools and the scheduler: Surface and its optional
// capabilities, Model, Tool, ChannelMemory, Router, PostObserver,
// UnattendedRun, DigestPost, OwnerNotice, RoutineProposal, InboxItem.
//
// It imports no other package of this module. The Command stays sealed by
// package privacy: only this package touches its private fields.
//
// Its subpackages are pure leaves over it: gate (what a tool call may do),
// fold (what a channel's journal means), chatcommand (what a person typed).
package core
