package core

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Boundary is the one place that turns a request into a Draft: it mints the
// id, reads the clock and stamps the actor. Adapters, tools and the model
// never hold one; ingress, the run loop and the scheduler do.
type Boundary struct {
	now func() time.Time

	mu      sync.Mutex
	entropy io.Reader
}

// NewBoundary returns a boundary using now as its clock (time.Now if nil).
func NewBoundary(now func() time.Time) *Boundary {
	if now == nil {
		now = time.Now
	}
	return &Boundary{now: now, entropy: ulid.Monotonic(rand.Reader, 0)}
}

// Now is the boundary clock, truncated to what every store keeps.
func (b *Boundary) Now() time.Time { return b.now().UTC().Truncate(time.Microsecond) }

// NewID mints a ULID.
func (b *Boundary) NewID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(b.now()), b.entropy).String()
}

// Meta is the optional causal context of a draft.
type Meta struct {
	Run   string // run id, when the command belongs to a run
	Cause string // id of the command that caused this one
}

// Human drafts a command from a verified platform user. The adapter that
// verified the person is the only source of p.
func (b *Boundary) Human(p Person, scope Scope, m Meta, payload Payload) (Draft, error) {
	if p.ID == "" {
		return Draft{}, fmt.Errorf("draft %s: human actor without a verified id", payload.Kind())
	}
	return b.draft(Actor{Type: ActorHuman, ID: p.ID, Platform: scope.Platform}, scope, m, payload)
}

// Agent drafts a command on behalf of a run.
func (b *Boundary) Agent(run string, scope Scope, m Meta, payload Payload) (Draft, error) {
	if run == "" {
		return Draft{}, fmt.Errorf("draft %s: agent actor without a run", payload.Kind())
	}
	m.Run = run
	return b.draft(Actor{Type: ActorAgent, ID: run, Platform: scope.Platform}, scope, m, payload)
}

// System drafts a command from the scheduler or an operator.
func (b *Boundary) System(id string, scope Scope, m Meta, payload Payload) (Draft, error) {
	return b.draft(Actor{Type: ActorSystem, ID: id, Platform: scope.Platform}, scope, m, payload)
}

func (b *Boundary) draft(a Actor, scope Scope, m Meta, payload Payload) (Draft, error) {
	if payload == nil {
		return Draft{}, fmt.Errorf("draft: nil payload")
	}
	k := payload.Kind()
	if err := scope.Validate(); err != nil {
		return Draft{}, fmt.Errorf("draft %s: %w", k, err)
	}
	raw, err := CanonicalJSON(payload)
	if err != nil {
		return Draft{}, fmt.Errorf("draft %s: encode payload: %w", k, err)
	}
	return Draft{c: Command{
		id: b.NewID(), kind: k, v: currentVersion(k), actor: a, scope: scope,
		run: m.Run, cause: m.Cause, at: b.Now(), payload: raw, payloadHash: sha256.Sum256(raw),
	}}, nil
}

// CanonicalJSON encodes v deterministically: struct fields in declaration
// order, map keys sorted, no insignificant whitespace.
func CanonicalJSON(v any) ([]byte, error) {
	return json.Marshal(v)
}
