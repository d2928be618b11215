package openai

import (
	"encoding/base64"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/internal/provider"
)

// request maps a view onto a chat completion request: System becomes the
// system message, each Message one chat message (assistant tool calls and
// tool results keep their call ids), each ToolSpec a function tool.
func (m *Model) request(v core.View) (sdk.ChatCompletionNewParams, error) {
	p := sdk.ChatCompletionNewParams{Model: shared.ChatModel(m.model)}
	if v.System != "" {
		p.Messages = append(p.Messages, sdk.SystemMessage(v.System))
	}
	for i, msg := range v.Messages {
		switch msg.Role {
		case core.RoleUser:
			if len(msg.Images) == 0 {
				p.Messages = append(p.Messages, sdk.UserMessage(msg.Text))
				continue
			}
			// Text, then each image as an image_url part with a data URL.
			parts := []sdk.ChatCompletionContentPartUnionParam{sdk.TextContentPart(msg.Text)}
			for _, im := range msg.Images {
				parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
					URL: "data:" + im.Type + ";base64," + base64.StdEncoding.EncodeToString(im.Data),
				}))
			}
			p.Messages = append(p.Messages, sdk.UserMessage(parts))
		case core.RoleAssistant:
			var a sdk.ChatCompletionAssistantMessageParam
			if msg.Text != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(msg.Text)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: tc.Args, // verbatim, even when it is not JSON
						},
					},
				})
			}
			p.Messages = append(p.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case core.RoleTool:
			if msg.ToolCallID == "" {
				return p, fmt.Errorf("message %d: tool result without a tool call id", i)
			}
			p.Messages = append(p.Messages, sdk.ToolMessage(msg.Text, msg.ToolCallID))
		default:
			return p, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	for _, t := range v.Tools {
		schema, err := provider.SchemaObject(t.Schema)
		if err != nil {
			return p, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		params := make(shared.FunctionParameters, len(schema))
		for k, raw := range schema {
			params[k] = raw // json.RawMessage: sent exactly as written
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if v.MaxTokens > 0 {
		if m.maxTokens == MaxCompletionTokensField {
			p.MaxCompletionTokens = param.NewOpt(int64(v.MaxTokens))
		} else {
			p.MaxTokens = param.NewOpt(int64(v.MaxTokens))
		}
	}
	return p, nil
}

// reply maps the first choice back onto a core.Reply.
func (m *Model) reply(res *sdk.ChatCompletion) (core.Reply, error) {
	if res == nil || len(res.Choices) == 0 {
		return core.Reply{}, provider.BadResponse(m.name, "chat completion without choices")
	}
	msg := res.Choices[0].Message
	r := core.Reply{
		Text:     msg.Content,
		Provider: m.name,
		Model:    res.Model,
		Usage: core.Usage{
			InputTokens:  int(res.Usage.PromptTokens),
			OutputTokens: int(res.Usage.CompletionTokens),
		},
	}
	if r.Model == "" {
		r.Model = m.model
	}
	if r.Text == "" && msg.Refusal != "" {
		r.Text = msg.Refusal
	}
	for _, tc := range msg.ToolCalls {
		call := core.ToolCall{ID: tc.ID}
		switch tc.Type {
		case "custom":
			call.Name, call.Args = tc.Custom.Name, tc.Custom.Input
		default: // "function", and servers that leave the type out
			call.Name, call.Args = tc.Function.Name, tc.Function.Arguments
		}
		if call.Name == "" {
			return core.Reply{}, provider.BadResponse(m.name, "tool call %q without a name", tc.ID)
		}
		if call.ID == "" {
			call.ID = provider.CallID()
		}
		r.ToolCalls = append(r.ToolCalls, call)
	}
	return r, nil
}
