package chatcommand

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// A routine's schedule is typed as a 5-field cron spec, a descriptor
// (@hourly, @daily, @weekly, @monthly, @every 30m) or in the words the
// proposal card uses ("every weekday at 09:00", "daily at noon", "every 2
// hours"). ParseSchedule turns any of them into the spec the scheduler
// runs; Words says a spec back the same way.

// ScheduleExample is a valid schedule shown with every refusal.
const ScheduleExample = "every weekday at 09:00"

// separator finds where a routine command's schedule ends and its
// instruction begins: the first ':' that is not inside a time of day
// ("09:00"). -1 when there is none.
func separator(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		if i > 0 && isDigit(s[i-1]) && i+2 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && (i+3 == len(s) || !isDigit(s[i+3])) {
			continue // a time of day: 9:30, 17:30
		}
		return i
	}
	return -1
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// ParseSchedule reads a schedule as typed (without its zone) and returns
// the spec the scheduler runs. The error quotes what was typed and shows a
// valid example; it does not check the minimum interval or the zone, which
// the scheduler holds.
func ParseSchedule(typed string) (string, error) {
	t := strings.Join(strings.Fields(typed), " ")
	if t == "" {
		return "", fmt.Errorf("a routine needs a schedule, e.g. `%s`", ScheduleExample)
	}
	spec, ok := scheduleWords(strings.Join(strings.Fields(strings.ToLower(strings.ReplaceAll(t, ",", " "))), " "))
	if !ok {
		spec = t
	}
	if strings.HasPrefix(spec, "@every") {
		if _, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every"))); err != nil {
			return "", fmt.Errorf("I can't read the schedule %q: `@every` needs a duration such as 30m or 2h", t)
		}
		return spec, nil
	}
	p := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	if _, err := p.Parse(spec); err != nil {
		return "", fmt.Errorf("I can't read the schedule %q. Try `%s`, `daily at noon`, `every 2 hours`, a cron spec like `0 9 * * 1-5`, or `@every 30m`", t, ScheduleExample)
	}
	return spec, nil
}

var (
	reEveryN   = regexp.MustCompile(`^every (\d+) ?(minutes?|mins?|m|hours?|hrs?|h)$`)
	reEveryDur = regexp.MustCompile(`^every (\d+[hm](?:\d+m)?)$`)
	reHourAt   = regexp.MustCompile(`^every hour at :?(\d{1,2})$`)
	reDayOf    = regexp.MustCompile(`^on day (\d{1,2}) of every month(?: at (.+))?$`)
	reTime     = regexp.MustCompile(`^(\d{1,2})(?::(\d{2}))?(am|pm)?$`)
)

// scheduleWords reads the schedule words the card uses (lower case, no
// commas) into a spec.
func scheduleWords(w string) (string, bool) {
	switch w {
	case "hourly", "every hour", "every hour on the hour":
		return "@hourly", true
	case "daily", "every day":
		return "@daily", true
	case "weekly", "every week":
		return "@weekly", true
	case "monthly", "every month":
		return "@monthly", true
	}
	if m := reEveryN.FindStringSubmatch(w); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n <= 0 {
			return "", false
		}
		if strings.HasPrefix(m[2], "h") {
			return fmt.Sprintf("@every %dh", n), true
		}
		if n < 60 && 60%n == 0 {
			return fmt.Sprintf("*/%d * * * *", n), true // the card says "every n minutes"
		}
		return fmt.Sprintf("@every %dm", n), true
	}
	if m := reEveryDur.FindStringSubmatch(w); m != nil {
		return "@every " + m[1], true
	}
	if m := reHourAt.FindStringSubmatch(w); m != nil {
		if n, _ := strconv.Atoi(m[1]); n < 60 {
			return fmt.Sprintf("%d * * * *", n), true
		}
		return "", false
	}
	if m := reDayOf.FindStringSubmatch(w); m != nil {
		dom, _ := strconv.Atoi(m[1])
		if dom < 1 || dom > 31 {
			return "", false
		}
		at := "00:00"
		if m[2] != "" {
			at = m[2]
		}
		min, hours, ok := times(at)
		if !ok {
			return "", false
		}
		return fmt.Sprintf("%d %s %d * *", min, hours, dom), true
	}
	days, at, ok := strings.Cut(w, " at ")
	if !ok {
		return "", false
	}
	min, hours, ok := times(at)
	if !ok {
		return "", false
	}
	dow, ok := daysOfWeek(days)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d %s * * %s", min, hours, dow), true
}

// times reads "09:00", "8am", "noon", "09:00 and 17:00": one minute, the
// hours (a cron can only say several times that share their minute).
func times(s string) (min int, hours string, ok bool) {
	var hs []string
	min = -1
	var ts []string // "8 am" is one time
	for _, w := range strings.Fields(s) {
		switch {
		case w == "and":
		case (w == "am" || w == "pm") && len(ts) > 0:
			ts[len(ts)-1] += w
		default:
			ts = append(ts, w)
		}
	}
	for _, t := range ts {
		h, m := 0, 0
		switch t {
		case "noon":
			h = 12
		case "midnight":
			h = 0
		default:
			p := reTime.FindStringSubmatch(t)
			if p == nil {
				return 0, "", false
			}
			h, _ = strconv.Atoi(p[1])
			if p[2] != "" {
				m, _ = strconv.Atoi(p[2])
			}
			switch p[3] {
			case "am", "pm":
				if h < 1 || h > 12 {
					return 0, "", false
				}
				h %= 12
				if p[3] == "pm" {
					h += 12
				}
			}
		}
		if h > 23 || m > 59 || min >= 0 && m != min {
			return 0, "", false
		}
		min = m
		hs = append(hs, strconv.Itoa(h))
	}
	return min, strings.Join(hs, ","), len(hs) > 0
}

var weekdayNumbers = map[string]int{
	"sunday": 0, "sun": 0, "monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "tues": 2,
	"wednesday": 3, "wed": 3, "thursday": 4, "thu": 4, "thurs": 4, "friday": 5, "fri": 5,
	"saturday": 6, "sat": 6,
}

// daysOfWeek reads "every weekday", "daily", "every monday and thursday",
// "every monday to friday", "on mondays" into a cron day-of-week field.
func daysOfWeek(s string) (string, bool) {
	s = strings.TrimSpace(s)
	switch s {
	case "daily", "every day":
		return "*", true
	case "every weekday", "weekdays", "on weekdays":
		return "1-5", true
	case "every weekend day", "weekends", "on weekends", "every weekend":
		return "0,6", true
	}
	rest, ok := strings.CutPrefix(s, "every ")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "on "); !ok {
			return "", false
		}
	}
	day := func(w string) (int, bool) {
		n, ok := weekdayNumbers[w]
		if !ok {
			n, ok = weekdayNumbers[strings.TrimSuffix(w, "s")]
		}
		return n, ok
	}
	if a, b, ok := strings.Cut(rest, " to "); ok {
		x, ok1 := day(strings.TrimSpace(a))
		y, ok2 := day(strings.TrimSpace(b))
		if !ok1 || !ok2 {
			return "", false
		}
		return fmt.Sprintf("%d-%d", x, y), true
	}
	var out []string
	for _, w := range strings.Fields(strings.ReplaceAll(rest, " and ", " ")) {
		n, ok := day(w)
		if !ok {
			return "", false
		}
		out = append(out, strconv.Itoa(n))
	}
	return strings.Join(out, ","), len(out) > 0
}
