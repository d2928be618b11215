package connectors

import (
	"encoding/json"
	"slices"
	"strings"
)

// Marlowe cannot tell by itself which of a server's tools post into (or
// read) a room of its own chat platform: only the operator's "rooms"
// setting makes the reachability rule check one. A tool whose arguments
// are named like a chat room and that is not declared is worth a word in
// doctor and the logs, so the operator decides rather than overlooks it.

// roomHint names a tool's arguments that look like a chat room, e.g.
// "post_message (channel_id)".
func roomHint(tool string, schema any) string {
	args := roomArgs(schema)
	if len(args) == 0 {
		return ""
	}
	return tool + " (" + strings.Join(args, ", ") + ")"
}

// roomArgs lists the top-level arguments of an input schema whose names
// say they pick a chat room, in name order.
func roomArgs(schema any) []string {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out []string
	for name := range s.Properties {
		if isRoomWord(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func isRoomWord(name string) bool {
	switch strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name)) {
	case "channel", "channelid", "channelname", "chat", "chatid", "room", "roomid", "conversation", "conversationid":
		return true
	}
	return false
}
