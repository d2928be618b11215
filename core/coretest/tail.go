package coretest

import (
	"context"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
)

// The tail reads scan everything: the in-memory journal has no indexes,
// and journaltest's reference filters are what the stores' SQL must match.

// everything returns the whole journal in (channel, seq) order.
func (j *MemJournal) everything(ctx context.Context) ([]core.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j.st.mu.Lock()
	defer j.st.mu.Unlock()
	chs := make([]core.ChannelKey, 0, len(j.st.rows))
	for ch := range j.st.rows {
		chs = append(chs, ch)
	}
	slices.Sort(chs)
	var out []core.Command
	for _, ch := range chs {
		for _, r := range j.st.rows[ch] {
			c, err := core.FromRecord(r)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// Unfinished implements core.Journal.
func (j *MemJournal) Unfinished(ctx context.Context) ([]core.Command, error) {
	all, err := j.everything(ctx)
	if err != nil {
		return nil, err
	}
	return journaltest.Unfinished(all), nil
}

// Policies implements core.Journal.
func (j *MemJournal) Policies(ctx context.Context) ([]core.Command, error) {
	all, err := j.everything(ctx)
	if err != nil {
		return nil, err
	}
	return journaltest.Policies(all), nil
}

// PostsSince implements core.Journal.
func (j *MemJournal) PostsSince(ctx context.Context, since time.Time) ([]core.Command, error) {
	all, err := j.everything(ctx)
	if err != nil {
		return nil, err
	}
	return journaltest.PostsSince(all, since), nil
}

// ItemChannels implements core.Journal.
func (j *MemJournal) ItemChannels(ctx context.Context, platform string) ([]core.ChannelKey, error) {
	all, err := j.everything(ctx)
	if err != nil {
		return nil, err
	}
	return journaltest.ItemChannels(all, platform), nil
}
