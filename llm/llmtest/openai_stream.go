package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// stream answers a chat completion request with "stream": true in the
// shape OpenAI documents for chat completion chunks: server-sent events,
// each `data: {chat.completion.chunk}`, the text as content deltas, tool
// calls as tool_calls deltas (name first, then the arguments), a chunk with
// finish_reason, a usage chunk when stream_options.include_usage asked for
// one, and `data: [DONE]`.
func (f *OpenAI) stream(w http.ResponseWriter, r *http.Request, in OpenAIChatRequest, req Request, resp Response, model string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		openAIError(w, http.StatusInternalServerError, nil, "the fake cannot stream on this connection")
		return
	}
	copyHeader(w, resp.Header)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	created := time.Now().Unix()
	send := func(choices []map[string]any, usage map[string]any) bool {
		chunk := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
		if usage != nil {
			chunk["usage"] = usage
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	delta := func(d map[string]any, finish any) []map[string]any {
		return []map[string]any{{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}
	}
	if !send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil) {
		return
	}
	for i, piece := range pieces(resp.Text, resp.Pieces) {
		if resp.PieceDelay > 0 && !f.wait(r, Response{Delay: resp.PieceDelay}) {
			return
		}
		if resp.CutAfter > 0 && i >= resp.CutAfter {
			return // the connection ends mid-answer: no finish, no [DONE]
		}
		if !send(delta(map[string]any{"content": piece}, nil), nil) {
			return
		}
	}
	finish := "stop"
	for i, c := range resp.ToolCalls {
		finish = "tool_calls"
		call := map[string]any{"index": i, "id": f.callID(c.ID), "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if !send(delta(map[string]any{"tool_calls": []map[string]any{call}}, nil), nil) {
			return
		}
		args := map[string]any{"index": i, "function": map[string]any{"arguments": c.Args}}
		if !send(delta(map[string]any{"tool_calls": []map[string]any{args}}, nil), nil) {
			return
		}
	}
	if !send(delta(map[string]any{}, finish), nil) {
		return
	}
	if in.StreamOptions.IncludeUsage {
		usage := resp.Usage
		if usage == (Usage{}) {
			usage = Usage{InputTokens: estimate(len(req.Body)), OutputTokens: estimate(len(resp.Text))}
		}
		if !send([]map[string]any{}, map[string]any{"prompt_tokens": usage.InputTokens, "completion_tokens": usage.OutputTokens,
			"total_tokens": usage.InputTokens + usage.OutputTokens}) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// pieces cuts text into n pieces of about equal length (n <= 0: 4), on
// rune boundaries; empty text is no piece.
func pieces(text string, n int) []string {
	if text == "" {
		return nil
	}
	if n <= 0 {
		n = 4
	}
	rs := []rune(text)
	n = min(n, len(rs))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(rs[i*len(rs)/n:(i+1)*len(rs)/n]))
	}
	return out
}
