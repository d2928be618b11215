package core

import (
	"fmt"
	"strings"
)

// ActorType says who caused a Command. It is stamped at the boundary only.
type ActorType string

const (
	ActorHuman  ActorType = "human"  // a verified platform user
	ActorAgent  ActorType = "agent"  // a run
	ActorSystem ActorType = "system" // scheduler or operator CLI
)

func (t ActorType) Valid() bool {
	switch t {
	case ActorHuman, ActorAgent, ActorSystem:
		return true
	}
	return false
}

// Actor is who a Command is attributed to.
type Actor struct {
	Type     ActorType `json:"type"`
	ID       string    `json:"id"`
	Platform string    `json:"platform"`
}

// Scope locates a Command: the channel key is platform/workspace/channel and
// Thread is the thread root ("" at top level).
type Scope struct {
	Platform  string `json:"platform"`
	Workspace string `json:"workspace"`
	Channel   string `json:"channel"`
	Thread    string `json:"thread"`
}

// ChannelKey names one channel's journal: "platform/workspace/channel".
type ChannelKey string

// Key returns the channel key of the scope.
func (s Scope) Key() ChannelKey {
	return ChannelKey(s.Platform + "/" + s.Workspace + "/" + s.Channel)
}

// Validate checks the parts a channel key is built from.
func (s Scope) Validate() error {
	for name, v := range map[string]string{"platform": s.Platform, "workspace": s.Workspace, "channel": s.Channel} {
		if v == "" && name != "workspace" {
			return fmt.Errorf("scope: %s is empty", name)
		}
		if strings.Contains(v, "/") {
			return fmt.Errorf("scope: %s %q contains '/'", name, v)
		}
	}
	return nil
}

// ParseChannelKey splits "platform/workspace/channel".
func ParseChannelKey(k string) (Scope, error) {
	parts := strings.Split(k, "/")
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return Scope{}, fmt.Errorf("channel key %q: want platform/workspace/channel", k)
	}
	return Scope{Platform: parts[0], Workspace: parts[1], Channel: parts[2]}, nil
}
