package core

import (
	"bytes"
	"crypto/sha256"
	"time"

	"github.com/oklog/ulid/v2"
)

// KeyedID is the ULID that key names: its time is t (to the millisecond)
// and its entropy a hash of key, so everyone who drafts the command for key
// mints the same id and the journal's UNIQUE (id) lets one of them in. A
// routine firing is keyed by (routine, slot): two schedulers that both think
// they hold the lease cannot both journal it.
func KeyedID(key string, t time.Time) string {
	h := sha256.Sum256([]byte(key))
	return ulid.MustNew(ulid.Timestamp(t), bytes.NewReader(h[:10])).String()
}

// SystemKeyed drafts a system command whose id is KeyedID(key, at): the
// one command for key that the journal will ever hold.
func (b *Boundary) SystemKeyed(id, key string, at time.Time, scope Scope, m Meta, payload Payload) (Draft, error) {
	d, err := b.System(id, scope, m, payload)
	if err != nil {
		return Draft{}, err
	}
	d.c.id = KeyedID(key, at)
	return d, nil
}

// HumanKeyed drafts a person's command whose id is KeyedID(key, at): a
// command carried out again for the same journaled request (a run
// re-executed after a crash or a lease handover) drafts the same id, and
// the journal holds it once.
func (b *Boundary) HumanKeyed(p Person, key string, at time.Time, scope Scope, m Meta, payload Payload) (Draft, error) {
	d, err := b.Human(p, scope, m, payload)
	if err != nil {
		return Draft{}, err
	}
	d.c.id = KeyedID(key, at)
	return d, nil
}
