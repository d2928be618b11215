package chatcommand

import "testing"

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
		{"routine", true, RoutineCommand{Op: RoutineUsage}},
		{"routine maintenance is due tomorrow", false, RoutineCommand{}},
		{"routines are boring", false, RoutineCommand{}},
		{"remember routine add @daily: x", false, RoutineCommand{}},
	} {
		got, ok := ParseRoutine(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: got %+v %v, want %+v %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if g := Parse(tc.in); (g.Kind == Routine) != tc.ok {
			t.Errorf("%q: grammar kind %v", tc.in, g.Kind)
		}
	}
}
