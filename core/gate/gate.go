package gate

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Verdict is the closed set of gate decisions.
type Verdict string

const (
	Allow Verdict = "allow"
	Deny  Verdict = "deny"
	Ask   Verdict = "ask" // needs a person's approval
)

// Request is everything the gate looks at. It holds no model output
// other than the call itself: the decision is code, never the model's.
type Request struct {
	Tool    core.Tool
	Args    map[string]any // validated arguments
	Exposed bool           // the channel policy exposes the tool to this run
	Policy  core.Policy
	// Trusted are the texts the triggering person wrote in this run: a
	// target value found in them was chosen by the person, not by content.
	Trusted []string
	// Consented reports an earlier approval or consent in the channel for
	// tool + destination.
	Consented func(tool, destination string) bool
}

// Decision is the gate's answer, journaled as permission.decided.
type Decision struct {
	Verdict     Verdict
	Reason      string
	Destination string // normalised target values, "" when the tool has none
}

// DefaultApprovalLevels are the consequence levels that need approval when a
// channel's policy sets none: send (unless the destination is already
// trusted) and irreversible (always).
func DefaultApprovalLevels() []core.Consequence {
	return []core.Consequence{core.Send, core.Irreversible}
}

// Gate is the gate: a pure function of the request. In order:
//  1. a tool the channel does not expose is denied;
//     a read-only tool (or call, core.Tool.Check) is allowed, whatever the
//     policy's approval levels;
//  2. irreversible always needs approval (consents never cover it);
//  3. a target value the person did not write and nobody approved before
//     (it came from fetched pages, thread history, tool output, the model)
//     needs approval, whatever the consequence level;
//  4. a level the policy gates (default send) needs approval unless the
//     destination was approved before or, for send, the person named it;
//  5. everything else (read and write by default) is allowed.
func Decide(r Request) Decision {
	t := r.Tool
	targets := targetValues(t, r.Args)
	dest := destination(targets)
	consented := func(d string) bool { return r.Consented != nil && r.Consented(t.Name, d) }
	if !r.Exposed {
		return Decision{Verdict: Deny, Reason: fmt.Sprintf("%s is not enabled in this channel (channel policy)", t.Name), Destination: dest}
	}
	if t.Consequence == core.Read {
		return Decision{Verdict: Allow, Reason: "read-only: never gated", Destination: dest}
	}
	if t.Consequence == core.Irreversible {
		return Decision{Verdict: Ask, Reason: "irreversible actions always need a person's approval", Destination: dest}
	}
	var tainted []string
	for _, tv := range targets {
		if !namedIn(r.Trusted, tv.value) && !consented(tv.value) {
			tainted = append(tainted, fmt.Sprintf("%s %q", tv.name, tv.value))
		}
	}
	if len(tainted) > 0 {
		return Decision{Verdict: Ask, Destination: dest,
			Reason: fmt.Sprintf("target %s does not come from the requester's own message or an earlier approval", strings.Join(tainted, ", "))}
	}
	levels := r.Policy.ApprovalLevels
	if len(levels) == 0 {
		levels = DefaultApprovalLevels()
	}
	if slices.Contains(levels, t.Consequence) {
		switch {
		case consented(dest):
			return Decision{Verdict: Allow, Reason: "destination approved earlier in this channel", Destination: dest}
		case t.Consequence == core.Send && len(targets) > 0:
			// Every target was checked above: the person named it.
			return Decision{Verdict: Allow, Reason: "destination named by the requester", Destination: dest}
		case t.Consequence == core.Send:
			return Decision{Verdict: Ask, Reason: "sending outside the channel needs approval", Destination: dest}
		default:
			return Decision{Verdict: Ask, Reason: fmt.Sprintf("channel policy requires approval for %s actions", t.Consequence), Destination: dest}
		}
	}
	return Decision{Verdict: Allow, Reason: fmt.Sprintf("%s action allowed by channel policy", t.Consequence), Destination: dest}
}

type targetValue struct {
	name, value string
}

// targetValues extracts the tool's declared target arguments, normalised:
// a URL is reduced to its host (egress is keyed on the host), channel and
// user references lose their platform decoration.
func targetValues(t core.Tool, args map[string]any) []targetValue {
	var out []targetValue
	for _, name := range t.Targets {
		v, ok := args[name]
		if !ok || v == nil {
			continue
		}
		var vals []string
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				vals = append(vals, scalarString(e))
			}
		default:
			vals = append(vals, scalarString(v))
		}
		for _, s := range vals {
			if s = NormalizeTarget(s); s != "" {
				out = append(out, targetValue{name: name, value: s})
			}
		}
	}
	return out
}

func scalarString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// NormalizeTarget reduces a target value to what the gate compares: the
// host of an http(s) URL, otherwise the bare id or name of a channel or user
// reference (<#C1|general> → C1, <@U1> → U1, #general → general, @bob →
// bob), lower-cased.
func NormalizeTarget(s string) string {
	s = strings.TrimSpace(s)
	if u, err := url.Parse(s); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return strings.ToLower(u.Hostname())
	}
	if strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		s = strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">")
		if i := strings.IndexByte(s, '|'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimLeft(s, "#@!&")
	}
	s = strings.TrimLeft(s, "#@")
	return strings.ToLower(s)
}

func destination(targets []targetValue) string {
	vals := make([]string, 0, len(targets))
	for _, t := range targets {
		vals = append(vals, t.value)
	}
	return strings.Join(vals, ",")
}

// namedIn reports whether value occurs in one of texts as a whole token:
// case-insensitive, not glued to letters, digits or host characters on
// either side, so "evil.com" is not found in "notevil.com" nor
// "example.com" in "sub.example.com".
func namedIn(texts []string, value string) bool {
	if value == "" {
		return false
	}
	v := strings.ToLower(value)
	for _, text := range texts {
		t := strings.ToLower(text)
		for from := 0; ; {
			i := strings.Index(t[from:], v)
			if i < 0 {
				break
			}
			start, end := from+i, from+i+len(v)
			if tokenBoundaryBefore(t, start) && tokenBoundaryAfter(t, end) {
				return true
			}
			from = start + 1
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b >= 0x80
}

func tokenBoundaryBefore(t string, i int) bool {
	if i == 0 {
		return true
	}
	b := t[i-1]
	return !isWordByte(b) && b != '.'
}

func tokenBoundaryAfter(t string, i int) bool {
	if i >= len(t) {
		return true
	}
	b := t[i]
	if b == '.' {
		// A sentence may end right after a host: "see example.com."
		return i+1 >= len(t) || !isWordByte(t[i+1])
	}
	return !isWordByte(b)
}
