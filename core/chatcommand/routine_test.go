package chatcommand

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseRoutineCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want RoutineCommand
	}{
		{"routine add 0 9 * * 1-5 tz Europe/Paris: post the digest", true, RoutineCommand{Op: RoutineAdd, Spec: "0 9 * * 1-5", TZ: "Europe/Paris", Instruction: "post the digest"}},
		{"routine add @every 30m: check: twice", true, RoutineCommand{Op: RoutineAdd, Spec: "@every 30m", Instruction: "check: twice"}},
		{"Routine ADD @daily: x", true, RoutineCommand{Op: RoutineAdd, Spec: "@daily", Instruction: "x"}},
		{"routines", true, RoutineCommand{Op: RoutineList}},
		{"routine list", true, RoutineCommand{Op: RoutineList}},
		{"routine pause r1abc", true, RoutineCommand{Op: RoutinePause, ID: "r1abc"}},
		{"routine delete r1abc", true, RoutineCommand{Op: RoutineDelete, ID: "r1abc"}},
		{"routine run r1abc", true, RoutineCommand{Op: RoutineRun, ID: "r1abc"}},
		{"routine edit r1abc 0 10 * * 1-5", true, RoutineCommand{Op: RoutineEdit, ID: "r1abc", Spec: "0 10 * * 1-5"}},
		{"routine edit r1abc tz Asia/Tokyo", true, RoutineCommand{Op: RoutineEdit, ID: "r1abc", TZ: "Asia/Tokyo"}},
		{"routine edit r1abc: shorter: three bullets", true, RoutineCommand{Op: RoutineEdit, ID: "r1abc", Instruction: "shorter: three bullets"}},
		{"routine EDIT r1abc @daily tz UTC: x", true, RoutineCommand{Op: RoutineEdit, ID: "r1abc", Spec: "@daily", TZ: "UTC", Instruction: "x"}},
		{"routine edit r1abc", true, RoutineCommand{Op: RoutineUsage}},
		{"routine edit r1abc:", true, RoutineCommand{Op: RoutineUsage}},
		{"routine edit", true, RoutineCommand{Op: RoutineUsage}},
		{"routine resume", true, RoutineCommand{Op: RoutineUsage}},
		{"routine add @daily", true, RoutineCommand{Op: RoutineUsage}},
		{"routine add : x", true, RoutineCommand{Op: RoutineUsage}},
		// In words, as the proposal card says them; the instruction starts
		// after the schedule's own grammar, not at the first ':'.
		{"routine add every weekday at 09:00: post a digest", true, RoutineCommand{Op: RoutineAdd, Spec: "0 9 * * 1-5", Schedule: "every weekday at 09:00", Instruction: "post a digest"}},
		{"routine add every day at 8am tz Europe/Paris: standup notes", true, RoutineCommand{Op: RoutineAdd, Spec: "0 8 * * *", Schedule: "every day at 8am", TZ: "Europe/Paris", Instruction: "standup notes"}},
		{"routine add every monday and thursday at 17:30: wrap up: the week", true, RoutineCommand{Op: RoutineAdd, Spec: "30 17 * * 1,4", Schedule: "every monday and thursday at 17:30", Instruction: "wrap up: the week"}},
		{"routine add every 2 hours: ping", true, RoutineCommand{Op: RoutineAdd, Spec: "@every 2h", Schedule: "every 2 hours", Instruction: "ping"}},
		{"routine add hourly: ping", true, RoutineCommand{Op: RoutineAdd, Spec: "@hourly", Schedule: "hourly", Instruction: "ping"}},
		{"routine add daily at noon: lunch", true, RoutineCommand{Op: RoutineAdd, Spec: "0 12 * * *", Schedule: "daily at noon", Instruction: "lunch"}},
		{"routine add 0 9 * * 1-5:post", true, RoutineCommand{Op: RoutineAdd, Spec: "0 9 * * 1-5", Instruction: "post"}},
		{"routine edit r1abc every day at 07:45", true, RoutineCommand{Op: RoutineEdit, ID: "r1abc", Spec: "45 7 * * *", Schedule: "every day at 07:45"}},
		{"routine add every weekday at 25:00: x", true, RoutineCommand{Op: RoutineUsage}},
		{"routine add whenever you like: x", true, RoutineCommand{Op: RoutineUsage}},
		{"routine", true, RoutineCommand{Op: RoutineUsage}},
		{"routine maintenance is due tomorrow", false, RoutineCommand{}},
		{"routines are boring", false, RoutineCommand{}},
		{"remember routine add @daily: x", false, RoutineCommand{}},
	} {
		got, ok := ParseRoutine(tc.in)
		if got.Op == RoutineUsage && got.Problem != "" && tc.want.Op == RoutineUsage {
			got.Problem = "" // TestRoutineRefusalQuotesWhatWasTyped checks it
		}
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: got %+v %v, want %+v %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if g := Parse(tc.in); (g.Kind == Routine) != tc.ok {
			t.Errorf("%q: grammar kind %v", tc.in, g.Kind)
		}
	}
}

// A bad schedule is refused at parse time (before any approval), quoting
// what the person typed, not a fragment cut at a colon, with a valid
// example.
func TestRoutineRefusalQuotesWhatWasTyped(t *testing.T) {
	for _, in := range []string{
		"routine add every weekday at 25:00: post a digest",
		"routine add whenever you like: post a digest",
		"routine add 0 9 * *: post a digest",
	} {
		c, _ := ParseRoutine(in)
		typed := strings.TrimPrefix(in[:strings.LastIndex(in, ":")], "routine add ")
		if c.Op != RoutineUsage || !strings.Contains(c.Problem, strconv.Quote(typed)) || !strings.Contains(c.Problem, ScheduleExample) {
			t.Errorf("%q: %+v, want a refusal quoting %q with an example", in, c, typed)
		}
	}
}
