package telegram

import "github.com/marlowe-bot/marlowe/core"

var _ core.DMHelp = (*Adapter)(nil)

// EnableDMHelp implements core.DMHelp: a bot cannot write first to a user
// who never started it, so the engine tells them, once per thread, how to
// let it (requests for them wait in the thread meanwhile).
func (a *Adapter) EnableDMHelp(userID string) string {
	who := "They"
	if userID != "" {
		who = "<@" + userID + ">"
	}
	bot := "me"
	if u := a.identity().username; u != "" {
		bot = "@" + u
	}
	return who + " can open a private chat with " + bot + " and press Start; after that, requests for them come there too."
}
