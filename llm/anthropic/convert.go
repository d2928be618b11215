package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/internal/provider"
)

// request maps a view onto a Messages API request. System becomes the system
// prompt; user text and tool results become user turns (tool_result blocks,
// keyed by tool_use_id), assistant text and tool calls assistant turns
// (tool_use blocks). Consecutive turns of one role are merged into one
// message, as the API wants every tool_result for an assistant turn in the
// single user message that follows it.
func (m *Model) request(v core.View) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{Model: sdk.Model(m.model), MaxTokens: int64(m.maxTokens)}
	if v.MaxTokens > 0 {
		p.MaxTokens = int64(v.MaxTokens)
	}
	if v.System != "" {
		p.System = []sdk.TextBlockParam{{Text: v.System}}
	}

	var (
		role   core.Role // core.RoleUser or core.RoleAssistant, "" before the first turn
		blocks []sdk.ContentBlockParamUnion
	)
	flush := func() {
		if len(blocks) == 0 {
			return
		}
		if role == core.RoleAssistant {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		}
		blocks = nil
	}
	turn := func(r core.Role) {
		if r != role {
			flush()
			role = r
		}
	}
	for i, msg := range v.Messages {
		switch msg.Role {
		case core.RoleUser:
			turn(core.RoleUser)
			blocks = append(blocks, sdk.NewTextBlock(nonEmpty(msg.Text)))
			for _, im := range msg.Images {
				blocks = append(blocks, sdk.NewImageBlockBase64(im.Type, base64.StdEncoding.EncodeToString(im.Data)))
			}
		case core.RoleAssistant:
			turn(core.RoleAssistant)
			if msg.Text != "" || len(msg.ToolCalls) == 0 {
				blocks = append(blocks, sdk.NewTextBlock(nonEmpty(msg.Text)))
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, provider.ArgsObject(tc.Args), tc.Name))
			}
		case core.RoleTool:
			if msg.ToolCallID == "" {
				return p, fmt.Errorf("message %d: tool result without a tool call id", i)
			}
			turn(core.RoleUser)
			res := sdk.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
			if msg.Text != "" {
				res.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: msg.Text}}}
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &res})
		default:
			return p, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	flush()

	for _, t := range v.Tools {
		schema, err := provider.SchemaObject(t.Schema)
		if err != nil {
			return p, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		in := sdk.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, val := range schema {
			switch k {
			case "type": // always "object", set by the SDK
			case "properties":
				in.Properties = val
			case "required":
				var req []string
				if err := json.Unmarshal(val, &req); err != nil {
					return p, fmt.Errorf("tool %q: schema \"required\" is not a list of strings", t.Name)
				}
				in.Required = req
			default:
				in.ExtraFields[k] = val
			}
		}
		tool := sdk.ToolUnionParamOfTool(in, t.Name)
		if t.Description != "" {
			tool.OfTool.Description = sdk.String(t.Description)
		}
		p.Tools = append(p.Tools, tool)
	}
	return p, nil
}

// The API refuses empty text blocks.
func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	return s
}

// reply maps the response's text and tool_use blocks onto a core.Reply.
func (m *Model) reply(res *sdk.Message) (core.Reply, error) {
	if res == nil || !res.JSON.Content.Valid() {
		return core.Reply{}, provider.BadResponse(m.name, "message without content")
	}
	u := res.Usage
	r := core.Reply{
		Provider: m.name,
		Model:    res.Model,
		Usage: core.Usage{
			// Cached prompt tokens are prompt tokens too: budgets count them all.
			InputTokens:  int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens),
			OutputTokens: int(u.OutputTokens),
		},
	}
	if r.Model == "" {
		r.Model = m.model
	}
	var text strings.Builder
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.Name == "" {
				return core.Reply{}, provider.BadResponse(m.name, "tool_use %q without a name", b.ID)
			}
			call := core.ToolCall{ID: b.ID, Name: b.Name, Args: string(b.Input)}
			if call.ID == "" {
				call.ID = provider.CallID()
			}
			r.ToolCalls = append(r.ToolCalls, call)
		}
	}
	r.Text = text.String()
	return r, nil
}
