package core

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrRedacted is returned when decoding a payload destroyed by a privacy deletion.
var ErrRedacted = errors.New("payload redacted")

// upcast lifts a stored payload of version v to the next version. Stored
// bytes are never rewritten; every read goes through here.
func upcast(k Kind, v int, raw json.RawMessage) (json.RawMessage, error) {
	switch {
	case k == KindMessageReceived && v == 1:
		// v1: {"user": "U1", "text": "..."}; v2 names the author as a Person.
		var old struct {
			User string `json:"user"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &old); err != nil {
			return nil, err
		}
		return json.Marshal(MessageReceived{Author: Person{ID: old.User}, Text: old.Text, Visibility: Public})
	}
	return nil, fmt.Errorf("no upcaster for %s v%d", k, v)
}

// Payload decodes c's payload into its current typed form, upcasting old
// versions on the way.
func (c Command) Payload() (Payload, error) {
	if c.redacted && !c.restated {
		return nil, ErrRedacted
	}
	p, ok := newPayload(c.kind)
	if !ok {
		return nil, fmt.Errorf("decode %s: no payload type", c)
	}
	raw := json.RawMessage(c.payload)
	cur := currentVersion(c.kind)
	if c.v < 1 || c.v > cur {
		return nil, fmt.Errorf("decode %s: payload version %d unsupported (current %d)", c, c.v, cur)
	}
	for v := c.v; v < cur; v++ {
		var err error
		if raw, err = upcast(c.kind, v, raw); err != nil {
			return nil, fmt.Errorf("decode %s: upcast v%d: %w", c, v, err)
		}
	}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("decode %s: %w", c, err)
	}
	return p, nil
}

// Decode is Payload with the concrete type asserted.
func Decode[T Payload](c Command) (T, error) {
	var zero T
	p, err := c.Payload()
	if err != nil {
		return zero, err
	}
	t, ok := p.(T)
	if !ok {
		return zero, fmt.Errorf("decode %s: payload is %T, not %T", c, p, zero)
	}
	return t, nil
}
