package chatcommand

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
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
	for k := InboxList; k < inboxEnd; k++ {
		want = append(want, fmt.Sprintf("inbox:%d", k))
	}
	for _, k := range want {
		if !listed[k] {
			t.Errorf("command %s is accepted by the grammar but not in Commands()", k)
		}
	}
	// A person is not a note: `forget me` and `forget <@U1>` are the
	// privacy erasure, `forget <note id>` drops a note from recall.
	for text, want := range map[string]string{
		"forget me": fmt.Sprintf("inbox:%d/", InboxForget), "Forget  ME": fmt.Sprintf("inbox:%d/", InboxForget),
		"forget <@U1>": fmt.Sprintf("inbox:%d/U1", InboxForget), "forget @U1": fmt.Sprintf("inbox:%d/U1", InboxForget),
		"forget m1": fmt.Sprintf("grammar:%d/m1", Forget), "export my data": fmt.Sprintf("inbox:%d/", InboxExport),
		"connections": fmt.Sprintf("inbox:%d/", InboxConnections), "Connections all": fmt.Sprintf("inbox:%d/all", InboxConnections),
		"disconnect GitHub": fmt.Sprintf("inbox:%d/GitHub", InboxDisconnect),
	} {
		got := fmt.Sprintf("grammar:%d/%s", Parse(text).Kind, Parse(text).Arg)
		if c := ParseInbox(text); c.Kind != InboxNone {
			got = fmt.Sprintf("inbox:%d/%s", c.Kind, c.Arg)
		}
		if got != want {
			t.Errorf("%q reads as %s, want %s", text, got, want)
		}
	}
	// Every routine verb the parser accepts is named by the help line.
	for _, op := range []RoutineOp{RoutineResume, RoutineDelete, RoutineRun} {
		if !strings.Contains(HelpText(), string(op)) {
			t.Errorf("help does not name routine %s", op)
		}
	}
}

func TestPolicyShowsDurationsInWords(t *testing.T) {
	for d, want := range map[time.Duration]string{20 * time.Minute: "20 minutes", 6 * time.Minute: "6 minutes", time.Hour: "1 hour",
		90 * time.Minute: "1 hour 30 minutes", 45 * time.Second: "45 seconds", 61 * time.Second: "1 minute 1 second"} {
		if got := DurationWords(d); got != want {
			t.Errorf("DurationWords(%v) = %q, want %q", d, got, want)
		}
	}
	got := DescribePolicy(core.Policy{}, nil)
	if !strings.Contains(got, "windows: thread 20 minutes, top level 6 minutes") || strings.Contains(got, "m0s") {
		t.Errorf("policy = %q", got)
	}
}

// The menu (Telegram's, Discord's) speaks of no threads, which a Telegram
// chat does not have; docs/telegram.md shows the menu as it is.
func TestMenuMatchesTelegramDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/telegram.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Menu() {
		if strings.Contains(m.Description, "thread") {
			t.Errorf("/%s: %q speaks of threads", m.Name, m.Description)
		}
		if row := "| `/" + m.Name + "` | " + m.Description + " |"; !strings.Contains(string(doc), row) {
			t.Errorf("docs/telegram.md lacks the menu row %s", row)
		}
	}
}

// docs/slack.md lists the offline grammar for a newcomer without a model:
// every command of the table is in that list (issue 36 item 11).
func TestSlackGuideListsTheOfflineGrammar(t *testing.T) {
	b, err := os.ReadFile("../../docs/slack.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "answering only its offline command")
	end := strings.Index(doc[max(start, 0):], "Optionally add")
	if start < 0 || end < 0 {
		t.Fatal("docs/slack.md has no offline grammar list")
	}
	list := strings.Join(strings.Fields(doc[start:start+end]), " ")
	for _, c := range Commands() {
		if s := strings.TrimSuffix(c.Short, " …"); !strings.Contains(list, "`"+s+"`") {
			t.Errorf("docs/slack.md's offline grammar list lacks `%s`", s)
		}
	}
}
