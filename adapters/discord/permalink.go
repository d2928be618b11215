package discord

import (
	"context"
	"errors"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Permalinker = (*Adapter)(nil)

// Permalink implements core.Permalinker with Discord's web links: a thread
// (a channel of its own) links to the thread, a message in a channel to
// the message; DMs live under @me.
func (a *Adapter) Permalink(_ context.Context, ref core.MessageRef) (string, error) {
	guild := ref.Scope.Workspace
	if guild == "" {
		guild = "@me"
	}
	switch {
	case ref.Scope.Thread != "":
		return "https://discord.com/channels/" + guild + "/" + ref.Scope.Thread, nil
	case ref.Scope.Channel != "" && ref.ID != "":
		return "https://discord.com/channels/" + guild + "/" + ref.Scope.Channel + "/" + ref.ID, nil
	}
	return "", errors.New("discord: permalink: no channel or message")
}
