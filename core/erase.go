package core

import (
	"encoding/json"
	"strings"
)

// Erasure of a text (a privacy deletion): every command of a channel whose
// payload carries the text is redacted with Journal.Redact (its payload
// destroyed, a signed command.redacted naming it appended, the chain still
// verifying). Which commands may be redacted is a closed list: the ones that
// carry conversation text (ErasableKinds). Commands that record decisions
// (approvals, consents, policy, routines, run ends) are never redacted by an
// erasure, since the folds need them to know what was decided; an erasure
// counts the ones that still carry the text, so its reply can say so.

// ErasableKinds are the kinds an erasure redacts when their payload carries
// the erased text: the conversation and the work done on it.
var ErasableKinds = []Kind{
	KindMessageReceived, KindRunStarted, KindModelStep, KindToolRequested,
	KindToolCompleted, KindMessagePosted, KindMessageUpdated,
	// A checkpoint holds conversation turns folded from the above.
	KindFoldCheckpoint,
}

// Erasable reports whether an erasure may redact a command of kind k.
func Erasable(k Kind) bool {
	for _, e := range ErasableKinds {
		if e == k {
			return true
		}
	}
	return false
}

// Erasure is what one erasure did in a channel: the commands redacted per
// kind (each now a redaction marker: no payload, named by a signed
// command.redacted), and what still carries the text.
type Erasure struct {
	// Removed counts the redacted commands by kind ("message.received": 2).
	Removed map[string]int
	// Markers is the number of command.redacted records appended.
	Markers int
	// Restated counts decision records that carried the text and now hold
	// a restatement without it (restate.go), by kind; each has a marker.
	Restated map[string]int
	// Kept counts commands that still carry the text and are neither
	// erasable nor restatable (routines, policy, memories), by kind.
	Kept map[string]int
	// OtherMemories are other live memories whose text contains the erased
	// text: they are not deleted by it.
	OtherMemories []string
}

// Add counts one redacted command of kind k.
func (e *Erasure) Add(k Kind) {
	if e.Removed == nil {
		e.Removed = map[string]int{}
	}
	e.Removed[k.String()]++
	e.Markers++
}

// Restate counts one command of kind k restated without the text.
func (e *Erasure) Restate(k Kind) {
	if e.Restated == nil {
		e.Restated = map[string]int{}
	}
	e.Restated[k.String()]++
	e.Markers++
}

// Keep counts one command of kind k that still carries the text.
func (e *Erasure) Keep(k Kind) {
	if e.Kept == nil {
		e.Kept = map[string]int{}
	}
	e.Kept[k.String()]++
}

// RemovedTotal is the number of commands redacted.
func (e Erasure) RemovedTotal() int {
	n := 0
	for _, v := range e.Removed {
		n += v
	}
	return n
}

// normText is the form texts are compared in: lower case, runs of white
// space as one space.
func normText(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// CarriesText reports whether c's payload holds text anywhere: in any
// string value, compared case-insensitively with white space collapsed,
// including strings that are themselves JSON (a tool call's arguments, a
// tool result), which are searched after decoding too. A redacted command
// carries nothing; an empty text matches nothing.
func CarriesText(c Command, text string) bool {
	want := normText(text)
	if want == "" || c.Redacted() || len(c.payload) == 0 {
		return false
	}
	var v any
	if err := json.Unmarshal(c.payload, &v); err != nil {
		return strings.Contains(normText(string(c.payload)), want)
	}
	return valueCarries(v, want, 0)
}

func valueCarries(v any, want string, depth int) bool {
	switch x := v.(type) {
	case string:
		if strings.Contains(normText(x), want) {
			return true
		}
		if depth < 4 {
			if t := strings.TrimSpace(x); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
				var inner any
				if json.Unmarshal([]byte(t), &inner) == nil {
					return valueCarries(inner, want, depth+1)
				}
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.Contains(normText(k), want) || valueCarries(e, want, depth) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if valueCarries(e, want, depth) {
				return true
			}
		}
	}
	return false
}
