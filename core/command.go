package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Hash is a sha256 digest: payload hashes and the per-channel chain links.
type Hash [32]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }
func (h Hash) IsZero() bool   { return h == Hash{} }

// ParseHash reads the hex form written by Hash.String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if s == "" {
		return h, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("parse hash %q: want 64 hex digits", s)
	}
	copy(h[:], b)
	return h, nil
}

// RedactedPayload replaces a payload destroyed by a privacy deletion. The
// payload hash is kept, so the chain and signature still verify.
var redactedMarker = []byte(`{"redacted":true}`)

// Command is one signed, chained entry of a channel's journal. Its fields are
// unexported: a Command is produced only by sealing a Draft (which only the
// Boundary can make) or by loading a stored Record, and a loaded Record only
// passes Verify if it was signed with the journal's key.
type Command struct {
	seq         uint64
	id          string
	kind        Kind
	v           int
	actor       Actor
	scope       Scope
	run         string
	cause       string
	at          time.Time
	payload     json.RawMessage
	redacted    bool
	restated    bool // redacted, with a restatement in place of the payload (restate.go)
	payloadHash Hash
	prev        Hash
	key         string // id of the signing key; "" on rows written before key ids
	sig         []byte
}

func (c Command) Seq() uint64         { return c.seq }
func (c Command) ID() string          { return c.id }
func (c Command) Kind() Kind          { return c.kind }
func (c Command) V() int              { return c.v }
func (c Command) Actor() Actor        { return c.actor }
func (c Command) Scope() Scope        { return c.scope }
func (c Command) Channel() ChannelKey { return c.scope.Key() }
func (c Command) Run() string         { return c.run }
func (c Command) Cause() string       { return c.cause }
func (c Command) At() time.Time       { return c.at }
func (c Command) Redacted() bool      { return c.redacted }
func (c Command) Restated() bool      { return c.restated }
func (c Command) PayloadHash() Hash   { return c.payloadHash }
func (c Command) Prev() Hash          { return c.prev }
func (c Command) Key() string         { return c.key }
func (c Command) Sig() []byte         { return bytes.Clone(c.sig) }
func (c Command) RawPayload() []byte  { return bytes.Clone(c.payload) }
func (c Command) String() string      { return fmt.Sprintf("%s#%d(%s)", c.Channel(), c.seq, c.kind) }

// header is the canonical, signed form of every envelope field except the
// payload itself (the payload hash covers it). Field order is fixed by the
// struct; time is integer microseconds so every store round-trips it exactly.
// Key is omitted when empty, so a row written before key ids existed has
// exactly the bytes it was signed over.
type header struct {
	Seq         uint64 `json:"seq"`
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	V           int    `json:"v"`
	Actor       Actor  `json:"actor"`
	Scope       Scope  `json:"scope"`
	Run         string `json:"run"`
	Cause       string `json:"cause"`
	At          int64  `json:"at"`
	PayloadHash string `json:"payload_hash"`
	Prev        string `json:"prev"`
	Key         string `json:"key,omitempty"`
}

// CanonicalHeader returns the bytes that are signed.
func (c Command) CanonicalHeader() []byte {
	b, err := json.Marshal(header{
		Seq: c.seq, ID: c.id, Kind: c.kind.String(), V: c.v, Actor: c.actor, Scope: c.scope,
		Run: c.run, Cause: c.cause, At: c.at.UnixMicro(),
		PayloadHash: c.payloadHash.String(), Prev: c.prev.String(), Key: c.key,
	})
	if err != nil { // only plain strings and ints: cannot fail
		panic(fmt.Sprintf("core: canonical header: %v", err))
	}
	return b
}

// Hash is the chain link to this command: sha256 over the signed header and
// the signature, so tampering with either breaks the next command's prev.
func (c Command) Hash() Hash {
	h := sha256.New()
	h.Write(c.CanonicalHeader())
	h.Write(c.sig)
	var out Hash
	copy(out[:], h.Sum(nil))
	return out
}

// Record is the storage form of a Command: what a store writes and reads back.
// Stores convert with Command.Record and FromRecord and never interpret it.
type Record struct {
	Seq         uint64
	ID          string
	Kind        string
	V           int
	Actor       Actor
	Scope       Scope
	Run         string
	Cause       string
	At          time.Time
	Payload     []byte // nil when Redacted, unless restated (restate.go)
	Redacted    bool
	PayloadHash []byte
	Prev        []byte
	Key         string // signing key id; "" on rows written before key ids
	Sig         []byte
}

// Record returns the storage form of c.
func (c Command) Record() Record {
	r := Record{
		Seq: c.seq, ID: c.id, Kind: c.kind.String(), V: c.v, Actor: c.actor, Scope: c.scope,
		Run: c.run, Cause: c.cause, At: c.at, Redacted: c.redacted, Key: c.key,
		PayloadHash: bytes.Clone(c.payloadHash[:]), Prev: bytes.Clone(c.prev[:]), Sig: bytes.Clone(c.sig),
	}
	if !c.redacted || c.restated {
		r.Payload = bytes.Clone(c.payload)
	}
	return r
}

// FromRecord loads a stored Command. It checks shape, not trust: call
// Verifier.Verify (or VerifyChain) before relying on it.
func FromRecord(r Record) (Command, error) {
	k, err := ParseKind(r.Kind)
	if err != nil {
		return Command{}, fmt.Errorf("load command seq %d: %w", r.Seq, err)
	}
	if len(r.PayloadHash) != 32 || len(r.Prev) != 32 {
		return Command{}, fmt.Errorf("load command seq %d: bad hash lengths", r.Seq)
	}
	c := Command{
		seq: r.Seq, id: r.ID, kind: k, v: r.V, actor: r.Actor, scope: r.Scope, run: r.Run,
		cause: r.Cause, at: r.At.UTC(), redacted: r.Redacted, key: r.Key, sig: bytes.Clone(r.Sig),
	}
	copy(c.payloadHash[:], r.PayloadHash)
	copy(c.prev[:], r.Prev)
	switch {
	case r.Redacted && r.Payload != nil:
		c.payload, c.restated = bytes.Clone(r.Payload), true
	case r.Redacted:
		c.payload = redactedMarker
	default:
		c.payload = bytes.Clone(r.Payload)
	}
	return c, nil
}

// Draft is an unsigned Command: everything but seq, prev and sig. Its fields
// are unexported so that only the Boundary can set the actor.
type Draft struct {
	c Command
}

func (d Draft) Kind() Kind          { return d.c.kind }
func (d Draft) Scope() Scope        { return d.c.scope }
func (d Draft) Channel() ChannelKey { return d.c.scope.Key() }
func (d Draft) ID() string          { return d.c.id }
func (d Draft) Actor() Actor        { return d.c.actor }
func (d Draft) Run() string         { return d.c.run }
func (d Draft) IsZero() bool        { return d.c.id == "" }
