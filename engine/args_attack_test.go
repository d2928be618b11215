package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/tools"
)

// recordingTransport answers every request with a page and records the URL,
// so a fetch that should never happen is seen.
type recordingTransport struct {
	mu   sync.Mutex
	urls []string
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.urls = append(rt.urls, r.URL.String())
	rt.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: http.NoBody, Request: r}, nil
}

func (rt *recordingTransport) got() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.urls...)
}

// TestToolArgumentsTheGateDidNotSeeNeverReachTheTool attacks every built-in
// tool that has a target: the person names a trusted destination, the model
// smuggles another one in under a key the gate does not judge (a case
// variant, an exact duplicate, an unknown key). Nothing may execute with the
// smuggled value; the model gets a structured validation error.
func TestToolArgumentsTheGateDidNotSeeNeverReachTheTool(t *testing.T) {
	rt := &recordingTransport{}
	builtins := tools.Builtins(tools.Options{HTTPClient: &http.Client{Transport: rt}})
	trusted := map[string]string{"channel": "C1", "user": "UBOB", "url": "https://good.example/page", "ask": "UBOB"}
	evil := map[string]string{"channel": "C9", "user": "UEVIL", "url": "https://evil.example/steal", "ask": "UEVIL"}
	extra := map[string]string{"post_to_channel": `,"text":"hi"`, "dm_person": `,"text":"hi"`, "fetch_url": ``, "ask_human": `,"question":"q"`}
	var withTargets int
	for _, tl := range builtins {
		if len(tl.Targets) == 0 {
			continue
		}
		withTargets++
		target := tl.Targets[0]
		good, bad := trusted[target], evil[target]
		if good == "" {
			t.Fatalf("%s: no attack values for target %q", tl.Name, target)
		}
		upper := strings.ToUpper(target[:1]) + target[1:]
		attacks := map[string]string{
			"case variant":       `{"` + target + `":"` + good + `"` + extra[tl.Name] + `,"` + upper + `":"` + bad + `"}`,
			"all caps variant":   `{"` + target + `":"` + good + `"` + extra[tl.Name] + `,"` + strings.ToUpper(target) + `":"` + bad + `"}`,
			"case variant first": `{"` + upper + `":"` + bad + `","` + target + `":"` + good + `"` + extra[tl.Name] + `}`,
			"duplicate key":      `{"` + target + `":"` + good + `"` + extra[tl.Name] + `,"` + target + `":"` + bad + `"}`,
			"unknown key":        `{"` + target + `":"` + good + `"` + extra[tl.Name] + `,"` + target + `_override":"` + bad + `"}`,
		}
		for name, args := range attacks {
			t.Run(tl.Name+"/"+name, func(t *testing.T) {
				m := coretest.NewScriptedModel(
					coretest.Calls(coretest.Call("c1", tl.Name, args)),
					coretest.Text("done"),
				)
				h := newHarness(t, m, builtins)
				h.deliver(h.mention(alice, "C0", "please use "+good+" for this"))
				h.idle()
				for _, p := range h.s.Posts() {
					if p.Out.Scope.Channel == bad || strings.Contains(p.Out.Scope.Channel, bad) {
						t.Fatalf("posted to the smuggled destination %s: %+v", bad, p)
					}
					if p.Out.Scope.Channel == good && p.Out.Scope.Channel != "C0" {
						t.Fatalf("executed despite invalid arguments: %+v", p)
					}
				}
				for _, u := range rt.got() {
					if strings.Contains(u, "evil.example") || strings.Contains(u, "good.example") {
						t.Fatalf("fetched %s despite invalid arguments", u)
					}
				}
				done := payloads[*core.ToolCompleted](h, "C0", core.KindToolCompleted)
				if len(done) != 1 || done[0].OK || done[0].Code != "invalid" {
					t.Fatalf("tool.completed = %+v, want one invalid", done)
				}
				if obs := lastText(m.Views()[1]); !strings.Contains(obs, `"code":"invalid"`) {
					t.Errorf("model saw %s, want a structured invalid error", obs)
				}
				if pd := payloads[*core.PermissionDecided](h, "C0", core.KindPermissionDecided); len(pd) != 0 {
					t.Errorf("the gate judged an invalid call: %+v", pd)
				}
			})
		}
	}
	if withTargets < 3 {
		t.Fatalf("only %d built-in tools have targets; the attack covers each", withTargets)
	}
}

// TestToolReceivesTheCanonicalArguments: what the tool decodes is the
// object the gate judged, re-encoded, not the model's text.
func TestToolReceivesTheCanonicalArguments(t *testing.T) {
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c1", "note", "  {\"text\" : \"a\\u0062c\"}\n")),
		coretest.Text("ok"),
	)
	h := newHarness(t, m, []core.Tool{rawArgsTool(log)})
	h.deliver(h.mention(alice, "C1", "go"))
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != `{"text":"abc"}` {
		t.Fatalf("tool received %q, want the canonical re-encoding", got)
	}
}

// rawArgsTool records the exact bytes it is given.
func rawArgsTool(log *toolLog) core.Tool {
	t := noteTool(log)
	t.Run = func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
		log.add(string(args))
		return core.Observation{Text: "ok", Trust: core.Trusted}, nil
	}
	return t
}
