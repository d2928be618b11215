package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// stream answers a Messages request with "stream": true as Anthropic
// documents it: server-sent events message_start, then per content block
// content_block_start / content_block_delta (text_delta, input_json_delta)
// / content_block_stop, then message_delta (stop_reason, usage) and
// message_stop. Response.Pieces, PieceDelay and CutAfter shape the text as
// for OpenAI.
func (f *Anthropic) stream(w http.ResponseWriter, r *http.Request, resp Response, model string, usage Usage) {
	fl, ok := w.(http.Flusher)
	if !ok {
		anthropicError(w, http.StatusInternalServerError, nil, "the fake cannot stream on this connection")
		return
	}
	copyHeader(w, resp.Header)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data map[string]any) bool {
		data["type"] = event
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if !send("message_start", map[string]any{"message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": usage.InputTokens, "output_tokens": 1},
	}}) {
		return
	}
	index := 0
	if resp.Text != "" {
		if !send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}) {
			return
		}
		for i, piece := range pieces(resp.Text, resp.Pieces) {
			if resp.PieceDelay > 0 && !f.wait(r, Response{Delay: resp.PieceDelay}) {
				return
			}
			if resp.CutAfter > 0 && i >= resp.CutAfter {
				return // the connection ends mid-answer: no message_stop
			}
			if !send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": piece}}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"index": 0}) {
			return
		}
		index++
	}
	stop := "end_turn"
	for _, c := range resp.ToolCalls {
		stop = "tool_use"
		if !send("content_block_start", map[string]any{"index": index, "content_block": map[string]any{
			"type": "tool_use", "id": f.callID(c.ID), "name": c.Name, "input": map[string]any{}}}) {
			return
		}
		args, err := json.Marshal(rawArgs(c.Args))
		if err != nil {
			return
		}
		if !send("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}}) {
			return
		}
		if !send("content_block_stop", map[string]any{"index": index}) {
			return
		}
		index++
	}
	if !send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage.OutputTokens}}) {
		return
	}
	send("message_stop", map[string]any{})
}
