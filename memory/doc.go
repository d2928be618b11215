// Package memory is per-channel memory (ARCHITECTURE.md section 7):
// remember, recall, forget and delete, with hybrid retrieval, provenance,
// a fixed per-turn budget and a rebuild path from the journal.
//
// # Ringfence
//
// A Service is reached only through Service.For(channel), which returns a
// *Channel bound to that one channel; it implements core.ChannelMemory for
// the run engine's tools (engine.Config.Memory = svc.Memory). Every Index
// call names the handle's channel, and reads of another channel happen only
// in recall, only for channels an admin linked with Service.Link (journaled
// as policy.changed in both channels, effective only while both declare it).
//
// Below the code, the stores differ:
//
//   - store/postgres runs every memory query in a transaction that switches
//     to the role marlowe_memory (SET LOCAL ROLE; NOLOGIN, not a superuser,
//     no BYPASSRLS) and sets marlowe.channel (SET LOCAL), under ROW LEVEL
//     SECURITY (forced for the owner too) with policies "channel =
//     current_setting('marlowe.channel')" plus mutually linked channels for
//     reading. A query that forgets its channel condition still sees only
//     its channel. The role is created by migration 00002 (or by a DBA); the
//     login role must be a member. Superusers bypass RLS, which is why the
//     role switch, not FORCE alone, carries the guarantee.
//   - store/sqlite has no row-level security: its ringfence is the
//     code-level channel condition on every query, held by the same
//     conformance suite (memory/memorytest).
//
// # Writes
//
// Remember is a request the harness adjudicates: the text is cleaned
// (control characters, invalid UTF-8) and capped (Options.MaxTextLen), the
// provenance stamped (origin command, actor, trust class, derivation),
// memory.written journaled first and indexed second. It is idempotent on
// the origin: a tool call re-executed after a crash gets its first memory
// back, even one that was journaled but never indexed (the run's journal is
// searched). Forget journals memory.forgotten and tombstones the memory
// (out of recall, text kept for admins). Delete is a privacy deletion: the
// memory.written payload is destroyed with Journal.Redact (command.redacted;
// the chain still verifies), memory.redacted is journaled, and the index
// keeps a tombstone without text, provenance or vectors. Correct replaces a
// memory's text (a new memory.written and the old one's memory.forgotten in
// one append).
//
// # Recall
//
// Hybrid: a dense cue (the core.Embedder's vectors, cosine) and a lexical
// cue (full text), each top Options.Candidates, fused by reciprocal rank
// (k = 60). Dense candidates under the similarity floor (default 0.35,
// Service.SetFloor at runtime) are dropped before fusion; lexical
// candidates are always real term matches. Then the budget: at most
// Options.PerQuery (3) snippets per query, Options.MaxSnippets (6) per turn
// (Channel.RecallTurn), each cut to Options.MaxChars (400): per-turn cost
// is constant however large memory grows. A handle bound to a thread
// (Channel.Thread) skips memories it already injected in that thread within
// Options.DedupWindow. Without an embedder, or when it fails, recall is
// lexical only and Result.Degraded says so. Channel implements
// core.TurnRecaller (RecallForTurn: RecallTurn through the thread's handle),
// so the run engine recalls for each new message by itself and injects the
// notes into the model's view; the recall tool stays for explicit searches.
//
// Vectors record their model and dimension; a new embedding model gets an
// index beside the old one (Rebuild embeds for it), never a silent mix.
//
// # Rebuild
//
// The index is a cache of the journal: Service.Rebuild (one channel) and
// Service.RebuildAll recompute it from memory.*, command.redacted and
// policy.changed commands to exactly the live state, reusing vectors of
// unchanged text. RebuildCommand implements `bot memory rebuild`.
//
// # Metrics
//
// Result carries each recall's cost (Chars, Tokens ≈ Chars/4), latency and
// mode; Service.Stats returns counters and histograms (latency, best dense
// similarity, tokens per recall) for the composition root to export.
package memory
