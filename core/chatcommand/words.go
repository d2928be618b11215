package chatcommand

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Words says a routine spec the way a person would check it on a proposal
// card ("every weekday at 09:00"). Specs it cannot say simply are shown as
// they are; the card's next firing times are exact either way.
func Words(spec string) string {
	spec = strings.TrimSpace(spec)
	switch strings.ToLower(spec) {
	case "@hourly":
		return "every hour, on the hour"
	case "@daily", "@midnight":
		return "every day at 00:00"
	case "@weekly":
		return "every Sunday at 00:00"
	case "@monthly":
		return "on day 1 of every month at 00:00"
	case "@yearly", "@annually":
		return "every 1 January at 00:00"
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok {
		if d, err := time.ParseDuration(strings.TrimSpace(rest)); err == nil {
			return "every " + humanDuration(d)
		}
	}
	literal := "on the cron schedule `" + spec + "`"
	f := strings.Fields(spec)
	if len(f) != 5 || f[3] != "*" {
		return literal
	}
	minute, hour, dom, dow := f[0], f[1], f[2], f[4]
	var when string
	m, mErr := strconv.Atoi(minute)
	switch {
	case mErr == nil && hour == "*":
		when = fmt.Sprintf("every hour at :%02d", m)
	case strings.HasPrefix(minute, "*/") && hour == "*":
		n, err := strconv.Atoi(minute[2:])
		if err != nil {
			return literal
		}
		when = fmt.Sprintf("every %d minutes", n)
	case mErr == nil:
		var times []string
		for _, h := range strings.Split(hour, ",") {
			hn, err := strconv.Atoi(h)
			if err != nil || hn > 23 {
				return literal
			}
			times = append(times, fmt.Sprintf("%02d:%02d", hn, m))
		}
		when = "at " + join(times)
	default:
		return literal
	}
	var days string
	switch {
	case dom == "*" && (dow == "*" || dow == "?"):
		days = "every day"
	case dom == "*":
		days = weekdays(dow)
		if days == "" {
			return literal
		}
	case dow == "*":
		if _, err := strconv.Atoi(dom); err != nil {
			return literal
		}
		days = "on day " + dom + " of every month"
	default:
		return literal
	}
	if strings.HasPrefix(when, "every ") {
		if days == "every day" {
			return when
		}
		return when + ", " + strings.TrimPrefix(days, "every ") // every hour at :15, weekday
	}
	return days + " " + when
}

var dayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// weekdays says a day-of-week field, "" when it is not a simple one.
func weekdays(dow string) string {
	switch dow {
	case "1-5", "MON-FRI", "mon-fri":
		return "every weekday"
	case "0,6", "6,0", "6-7", "SAT,SUN", "sat,sun":
		return "every weekend day"
	}
	day := func(s string) (string, bool) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 7 {
			return "", false
		}
		return dayNames[n], true
	}
	if a, b, ok := strings.Cut(dow, "-"); ok {
		x, ok1 := day(a)
		y, ok2 := day(b)
		if !ok1 || !ok2 {
			return ""
		}
		return "every " + x + " to " + y
	}
	var out []string
	for _, s := range strings.Split(dow, ",") {
		d, ok := day(s)
		if !ok {
			return ""
		}
		out = append(out, d)
	}
	return "every " + join(out)
}

func join(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// DurationWords says a duration as people write it: "20 minutes",
// "1 hour 30 minutes", "45 seconds" (never Go's "20m0s").
func DurationWords(d time.Duration) string {
	if d <= 0 {
		return "0 seconds"
	}
	var parts []string
	unit := func(n int64, one string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, strconv.FormatInt(n, 10)+" "+one+"s")
		}
	}
	unit(int64(d/time.Hour), "hour")
	unit(int64(d%time.Hour/time.Minute), "minute")
	unit(int64(d%time.Minute/time.Second), "second")
	if len(parts) == 0 {
		return d.String()
	}
	return strings.Join(parts, " ")
}

// humanDuration drops a duration's zero tails: 30m, 2h, 1h30m.
func humanDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
