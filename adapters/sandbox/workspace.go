package sandbox

import (
	"slices"

	"github.com/marlowe-bot/marlowe/core"
)

// Platform and Workspace are the scope parts of every sandbox event.
const (
	Platform  = "sandbox"
	Workspace = "local"
)

// BotID is the bot's user id in the sandbox.
const BotID = "marlowe"

// Member is a person (or the bot) in the workspace directory.
type Member struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Title string `json:"title,omitempty"`
	Color string `json:"color"`
	Bot   bool   `json:"bot,omitempty"`
}

// Group is a user group that can be mentioned (<!subteam^ID>).
type Group struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// Channel is a conversation: a public or private channel or a DM with the bot.
type Channel struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Topic      string          `json:"topic,omitempty"`
	Visibility core.Visibility `json:"visibility"`
	// Members lists who may read and write; nil means everyone.
	Members []string `json:"members,omitempty"`
	// DMWith is the person a DM channel belongs to.
	DMWith string `json:"dm_with,omitempty"`
}

func (c Channel) member(id string) bool {
	return c.Members == nil || slices.Contains(c.Members, id)
}

// directory is the fixed cast and layout of the workspace. It is built per
// Sandbox, so nothing here is package-level state.
type directory struct {
	bot        Member
	people     []Member
	groups     []Group
	broadcasts []string
	channels   []Channel
}

func newDirectory() *directory {
	d := &directory{
		bot: Member{ID: BotID, Name: "Marlowe", Title: "AI teammate", Color: "#5b4bdb", Bot: true},
		people: []Member{
			{ID: "alice", Name: "Alice", Title: "Engineering lead", Color: "#d9480f"},
			{ID: "bob", Name: "Bob", Title: "Backend engineer", Color: "#1971c2"},
			{ID: "carol", Name: "Carol", Title: "Product manager", Color: "#2b8a3e"},
		},
		groups:     []Group{{ID: "eng", Name: "eng", Members: []string{"alice", "bob"}}},
		broadcasts: []string{"here", "channel", "everyone"},
		channels: []Channel{
			{ID: "general", Name: "general", Visibility: core.Public, Topic: "Team-wide chatter. Mention @Marlowe to ask it something."},
			{ID: "random", Name: "random", Visibility: core.Public, Topic: "Non-work banter."},
			{ID: "private-team", Name: "private-team", Visibility: core.Private, Members: []string{"alice", "bob", BotID},
				Topic: "Private: Alice, Bob and Marlowe. Only mentions reach the bot here."},
		},
	}
	for _, p := range d.people {
		d.channels = append(d.channels, Channel{
			ID: "dm-" + p.ID, Name: "Marlowe", Visibility: core.DM, Members: []string{p.ID, BotID}, DMWith: p.ID,
			Topic: "Your direct messages with Marlowe. Everything here reaches the bot.",
		})
	}
	return d
}

func (d *directory) person(id string) (Member, bool) {
	for _, p := range d.people {
		if p.ID == id {
			return p, true
		}
	}
	return Member{}, false
}

// member resolves a person or the bot.
func (d *directory) member(id string) (Member, bool) {
	if id == d.bot.ID {
		return d.bot, true
	}
	return d.person(id)
}

func (d *directory) channel(id string) (Channel, bool) {
	for _, c := range d.channels {
		if c.ID == id {
			return c, true
		}
	}
	return Channel{}, false
}

func (d *directory) group(id string) bool {
	return slices.ContainsFunc(d.groups, func(g Group) bool { return g.ID == id })
}

func (d *directory) dmOf(personID string) (Channel, bool) {
	for _, c := range d.channels {
		if c.Visibility == core.DM && c.DMWith == personID {
			return c, true
		}
	}
	return Channel{}, false
}
