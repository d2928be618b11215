package core

import (
	"context"
	"slices"
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

// erasableKinds are the kinds an erasure redacts when their payload carries
// the erased text: the conversation and the work done on it. A checkpoint
// refers to conversation turns by seq, but may still quote a text in what
// it copies from decision records and memories.
var erasableKinds = []Kind{
	KindMessageReceived, KindRunStarted, KindModelStep, KindToolRequested,
	KindToolCompleted, KindMessagePosted, KindMessageUpdated, KindFoldCheckpoint,
}

// PlatformEraser is an optional Surface capability of a platform whose
// messages the bot itself keeps (the sandbox: its data file and the files
// attached in its composer). An erasure asks it to erase there too:
// EraseTexts erases, with their attached files and keeping no earlier
// copy: for a person's erasure (author set), every message by author and
// every message of the bot's that carries a piece of texts (TextMatcher:
// the whole text or any 40-character piece); other people's messages are
// theirs, as in the journal. Without an author (a deleted note), every
// message that carries a piece of texts. A channel other than "" limits
// the erasure to that room (a note is deleted from its channel). It returns how many messages
// it erased; a message erased already is not counted again.
type PlatformEraser interface {
	EraseTexts(ctx context.Context, channel, author string, texts *TextMatcher) (int, error)
}

// ErasableKinds lists the kinds an erasure may redact (a copy).
func ErasableKinds() []Kind { return slices.Clone(erasableKinds) }

// Erasable reports whether an erasure may redact a command of kind k.
func Erasable(k Kind) bool { return slices.Contains(erasableKinds, k) }

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

// CarriesText reports whether c's payload holds text, or a piece of it of
// MatchPiece characters or more, anywhere (TextMatcher.Carries). A
// redacted command carries nothing; an empty text matches nothing. An
// erasure of many texts builds one TextMatcher instead.
func CarriesText(c Command, text string) bool { return NewTextMatcher(text).Carries(c) }
