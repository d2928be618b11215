package coretest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// MemJournal is also an in-memory core.Leases, shared by its Reopen
// instances, so fenced appends can be tested without a database.

var _ core.Leases = (*MemJournal)(nil)

type memLease struct {
	holder  string
	token   int64
	expires time.Time
}

// Acquire implements core.Leases.
func (j *MemJournal) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (core.Fence, bool, error) {
	if err := ctx.Err(); err != nil {
		return core.Fence{}, false, err
	}
	if holder == "" {
		return core.Fence{}, false, errors.New("acquire lease: empty holder")
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	now := time.Now()
	l := j.st.leases[name]
	switch {
	case l == nil:
		l = &memLease{token: 1}
		j.st.leases[name] = l
	case l.holder == holder:
	case l.holder == "" || !now.Before(l.expires):
		l.token++
	default:
		return core.Fence{}, false, nil
	}
	l.holder, l.expires = holder, now.Add(ttl)
	return core.Fence{Name: name, Token: l.token}, true, nil
}

// Renew implements core.Leases.
func (j *MemJournal) Renew(ctx context.Context, holder string, ttl time.Duration, names ...string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	var held []string
	for _, n := range names {
		if l := j.st.leases[n]; l != nil && l.holder == holder {
			l.expires = time.Now().Add(ttl)
			held = append(held, n)
		}
	}
	return held, nil
}

// Release implements core.Leases.
func (j *MemJournal) Release(ctx context.Context, holder string, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	for _, n := range names {
		if l := j.st.leases[n]; l != nil && l.holder == holder {
			l.holder, l.expires = "", time.Now()
		}
	}
	return nil
}

// Lapsed implements core.Leases.
func (j *MemJournal) Lapsed(ctx context.Context, prefix string) ([]string, error) {
	return j.leasesWhere(ctx, prefix, false)
}

// Live implements core.Leases.
func (j *MemJournal) Live(ctx context.Context, prefix string) ([]string, error) {
	return j.leasesWhere(ctx, prefix, true)
}

// leasesWhere lists the held leases under prefix that are live (or lapsed).
func (j *MemJournal) leasesWhere(ctx context.Context, prefix string, live bool) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	var out []string
	now := time.Now()
	for n, l := range j.st.leases {
		if l.holder != "" && now.Before(l.expires) == live && strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
