package connectors

import (
	"errors"
	"strings"
)

// ErrAsked is a call's error when its server asked, mid-call, for input
// from a person (elicitation) or for a completion from Marlowe's model
// (sampling). Marlowe answers neither (it advertises neither capability):
// the ask is refused and the call fails, saying so.
var ErrAsked = errors.New("the server asked for something Marlowe does not provide")

// explainAsk turns the go-sdk client's refusal of an input request into a
// plain error; other errors are returned as they are. The client's own
// wording is matched: TestSamplingAndElicitationAreRefused pins it.
func explainAsk(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "does not support elicitation"):
		return newAskError(ErrAsked, "it asked for input from a person (MCP elicitation), which Marlowe does not support yet: it declined and the call did not complete", err)
	case strings.Contains(msg, "does not support CreateMessage"), strings.Contains(msg, "does not support sampling"):
		return newAskError(ErrAsked, "it asked Marlowe's model for a completion (MCP sampling), which Marlowe never provides: it declined and the call did not complete", err)
	}
	return err
}

func newAskError(kind error, why string, cause error) error {
	return &askError{kind: kind, why: why, cause: cause}
}

type askError struct {
	kind  error
	why   string
	cause error
}

func (e *askError) Error() string   { return e.why + " (" + e.cause.Error() + ")" }
func (e *askError) Unwrap() []error { return []error{e.kind, e.cause} }
