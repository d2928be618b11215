// Package scheduler runs routines (ARCHITECTURE.md section 8): cron specs
// in a time zone, folded from routine.* commands, fired at most once per
// slot by one process, each firing journaled (routine.fired) before its
// digest is posted.
package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultMinInterval is the shortest schedule allowed unless configured
// (MARLOWE_ROUTINE_MIN_INTERVAL).
const DefaultMinInterval = 5 * time.Minute

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed routine schedule in its zone.
type Schedule struct {
	sched cron.Schedule
	loc   *time.Location
}

// Next returns the first slot strictly after t.
func (s Schedule) Next(t time.Time) time.Time { return s.sched.Next(t.In(s.loc)).UTC() }

// ParseSpec validates spec in zone tz ("" = UTC) and refuses schedules that
// fire more often than min. Specs: 5-field cron, @hourly, @daily, @weekly
// (and the other robfig descriptors), @every <duration>.
func ParseSpec(spec, tz string, min time.Duration) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return Schedule{}, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Paris or America/New_York", tz)
	}
	if strings.HasPrefix(strings.ToUpper(spec), "TZ=") || strings.HasPrefix(strings.ToUpper(spec), "CRON_TZ=") {
		return Schedule{}, fmt.Errorf("put the zone after the spec: `routine add <spec> tz <zone>: …`")
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Schedule{}, fmt.Errorf("`@every` needs a duration such as 30m or 2h: %w", err)
		}
		if d < min {
			return Schedule{}, fmt.Errorf("`@every %s` is too often: routines run at most every %s", d, min)
		}
	}
	cs, err := parser.Parse(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("bad schedule %q (want 5-field cron like `0 9 * * 1-5`, @hourly, @daily, @weekly or @every 30m): %w", spec, err)
	}
	s := Schedule{sched: cs, loc: loc}
	// A cron spec can be as frequent as `* * * * *`: the minimum holds for
	// every spec, checked over the next firings.
	t := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for range 50 {
		n := s.Next(t)
		if n.IsZero() {
			return Schedule{}, fmt.Errorf("schedule %q never fires", spec)
		}
		if n.Sub(t) < min {
			return Schedule{}, fmt.Errorf("schedule %q fires every %s: routines run at most every %s", spec, n.Sub(t), min)
		}
		t = n
	}
	return s, nil
}
