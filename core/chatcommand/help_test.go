package chatcommand

import (
	"fmt"
	"strings"
	"testing"
)

// read names the command a message is, as the engine dispatches it:
// inbox commands first, then the grammar (routine commands by op).
func read(text string) string {
	if c := ParseInbox(text); c.Kind != InboxNone {
		return fmt.Sprintf("inbox:%d", c.Kind)
	}
	c := Parse(text)
	if c.Kind == Routine {
		r, _ := ParseRoutine(text)
		return "routine:" + string(r.Op)
	}
	return fmt.Sprintf("grammar:%d", c.Kind)
}

// Every command the parsers accept is in the table that help and the
// offline reply are generated from, and every example in it parses.
func TestHelpListsEveryCommand(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range Commands() {
		k := read(c.Example)
		if k == fmt.Sprintf("grammar:%d", Unknown) || strings.HasSuffix(k, ":"+string(RoutineUsage)) {
			t.Errorf("the example of %q does not parse: %q", c.Usage, c.Example)
		}
		listed[k] = true
		if !strings.Contains(HelpText(), "`"+c.Usage+"`") || !strings.Contains(NeedModelText(), "`"+c.Short+"`") {
			t.Errorf("%q is missing from help or the offline reply", c.Usage)
		}
	}
	var want []string
	for k := Help; k < kindEnd; k++ {
		switch k {
		case PolicyUsage, DeleteUsage, Routine: // answers to a bad command; routine ops below
		case PolicyShow:
			// `policy` alone: listed as the policy entry with policy set
		default:
			want = append(want, fmt.Sprintf("grammar:%d", k))
		}
	}
	for _, op := range []RoutineOp{RoutineAdd, RoutineList, RoutinePause, RoutineEdit} {
		want = append(want, "routine:"+string(op))
	}
	for k := InboxList; k <= InboxAboutMe; k++ {
		want = append(want, fmt.Sprintf("inbox:%d", k))
	}
	for _, k := range want {
		if !listed[k] {
			t.Errorf("command %s is accepted by the grammar but not in Commands()", k)
		}
	}
	// Every routine verb the parser accepts is named by the help line.
	for _, op := range []RoutineOp{RoutineResume, RoutineDelete, RoutineRun} {
		if !strings.Contains(HelpText(), string(op)) {
			t.Errorf("help does not name routine %s", op)
		}
	}
}
