package intent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// sharedScenarios finds ../shared/scenarios next to the module root.
func sharedScenarios(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "scenarios")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root (go.mod) not found above the test directory")
		}
		dir = parent
	}
}

func scenarioFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	shared := sharedScenarios(t)
	if _, err := os.Stat(shared); err != nil {
		t.Logf("shared scenarios not found at %s (%v): running only intent/testdata", shared, err)
	} else {
		m, err := filepath.Glob(filepath.Join(shared, "intent-*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Logf("no intent-*.jsonl in %s", shared)
		}
		files = append(files, m...)
	}
	local, err := filepath.Glob(filepath.Join("testdata", "intent-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(local) == 0 {
		t.Fatal("no scenarios in intent/testdata")
	}
	return append(files, local...)
}

// TestScenarios replays every scenario file and pins each message's
// decision and reason to the file's expect and reason.
func TestScenarios(t *testing.T) {
	seen := map[Reason]bool{}
	for _, file := range scenarioFiles(t) {
		t.Run(filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := parseScenario(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := ReplayScenario(bytes.NewReader(raw), &out); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(&out)
			n := 0
			for _, s := range steps {
				if s.botPost {
					continue
				}
				if !sc.Scan() {
					t.Fatalf("line %d (%s): no output", s.line, s.id)
				}
				n++
				var got struct {
					ID       string `json:"id"`
					Decision string `json:"decision"`
					Reason   string `json:"reason"`
				}
				dec := json.NewDecoder(strings.NewReader(sc.Text()))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&got); err != nil {
					t.Fatalf("output %q: %v", sc.Text(), err)
				}
				if got.ID != s.id {
					t.Fatalf("output %d is for %q, want %q (input order)", n, got.ID, s.id)
				}
				if s.expect == "" || s.reason == "" {
					t.Fatalf("line %d (%s): scenario has no expect/reason", s.line, s.id)
				}
				if got.Decision != s.expect || got.Reason != s.reason {
					t.Errorf("line %d (%s): got %s/%s, want %s/%s", s.line, s.id, got.Decision, got.Reason, s.expect, s.reason)
				}
				r, err := ParseReason(got.Reason)
				if err != nil {
					t.Fatal(err)
				}
				seen[r] = true
			}
			if sc.Scan() {
				t.Fatalf("extra output %q", sc.Text())
			}
		})
	}
	for _, r := range Reasons() {
		if !seen[r] {
			t.Errorf("no scenario produces reason %s", r)
		}
	}
}

func TestReplayOutputFormat(t *testing.T) {
	in := `{"t":0,"type":"message","id":"m1","channel":"C1","user":"U1","mentions":["BOT"]}
{"t":1,"type":"bot_post","id":"b1","channel":"C1","thread":"m1","answering":"m1"}

{"t":2,"type":"message","id":"m\"2","channel":"C1","thread":"m1","user":"U2"}
`
	var out bytes.Buffer
	if err := ReplayScenario(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"m1","decision":"route","reason":"mention"}
{"id":"m\"2","decision":"route","reason":"thread-window"}
`
	if out.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", out.String(), want)
	}
	// Deterministic.
	var again bytes.Buffer
	if err := ReplayScenario(strings.NewReader(in), &again); err != nil || again.String() != want {
		t.Fatalf("second replay differs: %q, %v", again.String(), err)
	}
	// An empty scenario prints nothing.
	var empty bytes.Buffer
	if err := ReplayScenario(strings.NewReader("\n  \n"), &empty); err != nil || empty.Len() != 0 {
		t.Fatalf("empty scenario: %q, %v", empty.String(), err)
	}
}

func TestReplayPolicy(t *testing.T) {
	in := `{"t":0,"type":"message","id":"s1","channel":"SHORT","user":"U1","mentions":["BOT"]}
{"t":0,"type":"bot_post","id":"sb1","channel":"SHORT","thread":"s1","answering":"s1"}
{"t":0,"type":"message","id":"d1","channel":"DEFAULT","user":"U1","mentions":["BOT"]}
{"t":0,"type":"bot_post","id":"db1","channel":"DEFAULT","thread":"d1","answering":"d1"}
{"t":29,"type":"message","id":"s2","channel":"SHORT","user":"U1"}
{"t":30,"type":"message","id":"s3","channel":"SHORT","user":"U1"}
{"t":30,"type":"message","id":"d2","channel":"DEFAULT","user":"U1"}
{"t":59,"type":"message","id":"s4","channel":"SHORT","thread":"s1","user":"U2"}
{"t":60,"type":"message","id":"s5","channel":"SHORT","thread":"s1","user":"U2"}
{"t":60,"type":"message","id":"d3","channel":"DEFAULT","thread":"d1","user":"U2"}
`
	policy := func(ch string) core.Policy {
		if ch == "SHORT" {
			return core.Policy{ThreadWindowS: 60, ToplevelWindowS: 30}
		}
		return core.Policy{}
	}
	var out bytes.Buffer
	if err := ReplayScenarioPolicy(strings.NewReader(in), &out, policy); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"s1","decision":"route","reason":"mention"}
{"id":"d1","decision":"route","reason":"mention"}
{"id":"s2","decision":"route","reason":"toplevel-window"}
{"id":"s3","decision":"ignore","reason":"no-window"}
{"id":"d2","decision":"route","reason":"toplevel-window"}
{"id":"s4","decision":"route","reason":"thread-window"}
{"id":"s5","decision":"ignore","reason":"no-window"}
{"id":"d3","decision":"route","reason":"thread-window"}
`
	if out.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", out.String(), want)
	}
}

func TestReplayScenarioSemantics(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string // decisions, space separated id:reason
	}{
		{
			name: "fractional seconds",
			in: `{"t":0,"type":"bot_post","id":"b1","channel":"C1"}
{"t":1199.999,"type":"message","id":"m1","channel":"C1","thread":"b1","user":"U1"}
{"t":1200.0,"type":"message","id":"m2","channel":"C1","thread":"b1","user":"U1"}`,
			want: "m1:thread-window m2:no-window",
		},
		{
			name: "a thread root is top level",
			in: `{"t":0,"type":"message","id":"m1","channel":"C1","thread":"m1","user":"U1","mentions":["BOT"]}
{"t":1,"type":"bot_post","id":"b1","channel":"C1","thread":"m1","answering":"m1"}
{"t":2,"type":"message","id":"m2","channel":"C1","user":"U1"}`,
			want: "m1:mention m2:toplevel-window",
		},
		{
			name: "answering a DM gives no top-level window",
			in: `{"t":0,"type":"message","id":"m1","channel":"C1","visibility":"dm","user":"U1"}
{"t":1,"type":"bot_post","id":"b1","channel":"C1","answering":"m1"}
{"t":2,"type":"message","id":"m2","channel":"C1","visibility":"public","user":"U1"}`,
			want: "m1:dm m2:no-window",
		},
		{
			name: "answering an unknown message opens the thread only",
			in: `{"t":0,"type":"bot_post","id":"b1","channel":"C1","thread":"x","answering":"before-the-scenario"}
{"t":2,"type":"message","id":"m1","channel":"C1","thread":"x","user":"U1"}
{"t":3,"type":"message","id":"m2","channel":"C1","user":"U1"}`,
			want: "m1:thread-window m2:no-window",
		},
		{
			name: "null optional fields",
			in:   `{"t":0,"type":"message","id":"m1","channel":"C1","user":"U1","thread":null,"mentions":null,"visibility":null,"bot":null}`,
			want: "m1:no-window",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ReplayScenario(strings.NewReader(tc.in), &out); err != nil {
				t.Fatal(err)
			}
			var got []string
			for line := range strings.Lines(out.String()) {
				var r ScenarioResult
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatal(err)
				}
				got = append(got, r.ID+":"+r.Reason.String())
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("got %s, want %s", strings.Join(got, " "), tc.want)
			}
		})
	}
}

func TestReplayMalformed(t *testing.T) {
	ok := `{"t":0,"type":"message","id":"m0","channel":"C1","user":"U1"}` + "\n"
	cases := []struct {
		name, in, want string
	}{
		{"not json", ok + "{not json\n", "line 2:"},
		{"array", ok + "[1,2]\n", "line 2:"},
		{"null line", ok + "null\n", "line 2: missing field type"},
		{"trailing garbage", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1"} x` + "\n", "line 2:"},
		{"missing id", ok + `{"t":1,"type":"message","channel":"C1","user":"U1"}`, "line 2: missing field id"},
		{"empty id", ok + `{"t":1,"type":"message","id":"","channel":"C1","user":"U1"}`, "line 2: missing field id"},
		{"missing type", ok + `{"t":1,"id":"m1","channel":"C1","user":"U1"}`, "line 2: missing field type"},
		{"bad type value", ok + `{"t":1,"type":"reaction","id":"m1","channel":"C1","user":"U1"}`, `line 2: type "reaction"`},
		{"missing channel", ok + `{"t":1,"type":"bot_post","id":"b1"}`, "line 2: missing field channel"},
		{"missing user", ok + `{"t":1,"type":"message","id":"m1","channel":"C1"}`, "line 2: missing field user"},
		{"missing t", ok + `{"type":"message","id":"m1","channel":"C1","user":"U1"}`, "line 2: missing field t"},
		{"t is a string", ok + `{"t":"1","type":"message","id":"m1","channel":"C1","user":"U1"}`, "line 2:"},
		{"bot is a string", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","bot":"yes"}`, "line 2:"},
		{"mentions is a string", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","mentions":"BOT"}`, "line 2:"},
		{"id is a number", ok + `{"t":1,"type":"message","id":7,"channel":"C1","user":"U1"}`, "line 2:"},
		{"negative t", ok + `{"t":-1,"type":"message","id":"m1","channel":"C1","user":"U1"}`, "line 2: t -1"},
		{"huge t", ok + `{"t":1e300,"type":"message","id":"m1","channel":"C1","user":"U1"}`, "line 2: t 1e+300"},
		{"t goes back", `{"t":5,"type":"message","id":"m0","channel":"C1","user":"U1"}` + "\n" + `{"t":4,"type":"message","id":"m1","channel":"C1","user":"U1"}`, "line 2: t 4 goes back"},
		{"duplicate id", ok + `{"t":1,"type":"bot_post","id":"m0","channel":"C1"}`, `line 2: id "m0" already used on line 1`},
		{"bad visibility", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","visibility":"secret"}`, `line 2: visibility "secret"`},
		{"empty mention", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","mentions":[""]}`, "line 2: empty mention"},
		{"unknown broadcast", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","mentions":["!all"]}`, `line 2: mention "!all"`},
		{"empty group", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","mentions":["@group:"]}`, "line 2: mention"},
		{"forward answering", ok + `{"t":1,"type":"bot_post","id":"b1","channel":"C1","answering":"m9"}` + "\n" + `{"t":2,"type":"message","id":"m9","channel":"C1","user":"U1"}`, "line 2: answering \"m9\""},
		{"answering itself", ok + `{"t":1,"type":"bot_post","id":"b1","channel":"C1","answering":"b1"}`, "line 2: answering"},
		{"forward reply", ok + `{"t":1,"type":"message","id":"m1","channel":"C1","user":"U1","reply_to":"b9"}` + "\n" + `{"t":2,"type":"bot_post","id":"b9","channel":"C1"}`, "line 2: reply_to"},
		{"answering across channels", ok + `{"t":1,"type":"bot_post","id":"b1","channel":"C2","answering":"m0"}`, `line 2: answering "m0", a message in channel "C1"`},
		{"blank lines count", ok + "\n\n" + `{"t":1}`, "line 4:"},
		{"line too long", ok + `{"t":1,"x":"` + strings.Repeat("a", maxScenarioLine) + `"}`, "line 2: longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := ReplayScenario(strings.NewReader(tc.in), &out)
			if err == nil {
				t.Fatalf("accepted; printed %q", out.String())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Fatalf("printed %q before failing", out.String())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestReplayWriteError(t *testing.T) {
	err := ReplayScenario(strings.NewReader(`{"t":0,"type":"message","id":"m1","channel":"C1","user":"U1"}`), failWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error = %v", err)
	}
}

func FuzzReplayScenario(f *testing.F) {
	for _, file := range scenarioFiles(f) {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"t":0,"type":"message","id":"m1","channel":"C1","user":"U1","mentions":["BOT","!here","@group:x","U2"]}`))
	f.Add([]byte(`{"t":0,"type":"bot_post","id":"b1","channel":"C1","answering":"b1"}`))
	f.Add([]byte("{\"t\":1e9,\"type\":\"message\",\"id\":\"m\",\"channel\":\"c\",\"user\":\"u\",\"thread\":\"m\",\"reply_to\":\"m\"}\n\n{"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out1, out2 bytes.Buffer
		err1 := ReplayScenario(bytes.NewReader(in), &out1)
		err2 := ReplayScenario(bytes.NewReader(in), &out2)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("not deterministic: %v vs %v", err1, err2)
		}
		if !bytes.Equal(out1.Bytes(), out2.Bytes()) {
			t.Fatalf("output not deterministic:\n%s\nvs\n%s", out1.Bytes(), out2.Bytes())
		}
		if err1 != nil {
			if !strings.HasPrefix(err1.Error(), "line ") {
				t.Fatalf("error does not name a line: %v", err1)
			}
			if out1.Len() != 0 {
				t.Fatalf("printed before failing: %q", out1.String())
			}
			return
		}
		steps, err := parseScenario(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("parse failed after replay succeeded: %v", err)
		}
		msgs := 0
		for _, s := range steps {
			if !s.botPost {
				msgs++
			}
		}
		for line := range strings.Lines(out1.String()) {
			msgs--
			var r ScenarioResult
			if err := json.Unmarshal([]byte(line), &r); err != nil || !r.Reason.Valid() || (r.Decision == "route") != r.Reason.Routes() {
				t.Fatalf("bad output line %q: %v", line, err)
			}
		}
		if msgs != 0 {
			t.Fatalf("output has %d lines too few", msgs)
		}
	})
}
