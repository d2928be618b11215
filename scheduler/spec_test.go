package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/scheduler"
)

func TestParseSpec(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		spec, tz string
		from     string
		next     []string // UTC
		err      string
	}{
		// Paris moves to summer time on 29 March 2026: 09:00 local is 08:00
		// UTC before and 07:00 UTC after.
		{spec: "0 9 * * *", tz: "Europe/Paris", from: "2026-03-28T00:00:00Z",
			next: []string{"2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"}},
		{spec: "@hourly", from: "2026-03-28T10:30:00Z", next: []string{"2026-03-28T11:00:00Z", "2026-03-28T12:00:00Z"}},
		{spec: "@weekly", tz: "America/New_York", from: "2026-03-02T00:00:00Z", next: []string{"2026-03-08T05:00:00Z", "2026-03-15T04:00:00Z"}},
		{spec: "@every 5m", from: "2026-03-28T10:00:00Z", next: []string{"2026-03-28T10:05:00Z"}},
		{spec: "@every 4m59s", err: "too often"},
		{spec: "*/2 * * * *", err: "fires every 2m0s"},
		{spec: "0 9 * * *", tz: "Local", err: "unknown time zone"},
		{spec: "CRON_TZ=UTC 0 9 * * *", err: "put the zone after the spec"},
		{spec: "0 9 * *", err: "bad schedule"},
	} {
		s, err := scheduler.ParseSpec(tc.spec, tc.tz, scheduler.DefaultMinInterval)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %q: err %v, want %q", tc.spec, tc.tz, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q %q: %v", tc.spec, tc.tz, err)
			continue
		}
		at := utc(tc.from)
		for _, want := range tc.next {
			at = s.Next(at)
			if !at.Equal(utc(want)) {
				t.Errorf("%q %q: next %s, want %s", tc.spec, tc.tz, at, want)
			}
		}
	}
}
