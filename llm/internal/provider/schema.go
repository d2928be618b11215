package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// SchemaObject splits a tool's JSON schema into its top-level members, each
// kept as the raw JSON it was written as (the SDKs' encoders pass
// json.RawMessage through untouched, where they would turn a json.Number
// into a string or round a float64). An empty schema is an object with no
// properties.
func SchemaObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]json.RawMessage{"type": json.RawMessage(`"object"`), "properties": json.RawMessage(`{}`)}, nil
	}
	if _, err := decodeObject(trimmed); err != nil {
		return nil, fmt.Errorf("tool schema: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &members); err != nil {
		return nil, fmt.Errorf("tool schema: %w", err)
	}
	return members, nil
}

// ArgsObject turns a tool call's raw argument text into the JSON object a
// provider that takes structured input (Anthropic's tool_use.input) needs when
// the call is replayed. Text that is not a JSON object is kept, verbatim, under
// "_raw_arguments" so the model can see what it sent.
func ArgsObject(args string) json.RawMessage {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 {
		return json.RawMessage(`{}`)
	}
	if _, err := decodeObject(trimmed); err == nil {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(map[string]string{"_raw_arguments": args})
	return b
}

func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object, got %T", v)
	}
	return obj, nil
}
