package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// A bot's managed role is the role Discord creates for it when it joins a
// guild, named after it and offered by the "@" autocomplete next to the
// bot's user. People pick either, so a mention of the bot's managed role is
// a mention of the bot. It is recognised by id, never by name: the role
// whose tags.bot_id is the bot's user id.

// roleJSON is a role as the gateway and REST send it; discordgo's Role has
// no tags.
type roleJSON struct {
	ID          string    `json:"id"`
	Permissions permValue `json:"permissions"`
	Tags        *struct {
		BotID string `json:"bot_id"`
	} `json:"tags"`
}

// permValue is a permissions field: a decimal string since API v8, a
// number before.
type permValue int64

func (p *permValue) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(bytes.Trim(b, `"`), &n); err != nil {
		return fmt.Errorf("permissions %s: %w", b, err)
	}
	*p = permValue(n)
	return nil
}

func (r roleJSON) botID() string {
	if r.Tags == nil {
		return ""
	}
	return r.Tags.BotID
}

// managedRoles knows, per guild, the roles managed for a bot (role id →
// bot user id), from GUILD_CREATE, GUILD_ROLE_CREATE/UPDATE/DELETE and
// GET guilds/{id}. A guild in the map with no entries has none.
type managedRoles struct {
	mu sync.RWMutex
	m  map[string]map[string]string
}

func newManagedRoles() *managedRoles { return &managedRoles{m: map[string]map[string]string{}} }

// setGuild replaces what is known of guild's roles.
func (r *managedRoles) setGuild(guild string, roles []roleJSON) {
	if guild == "" {
		return
	}
	m := map[string]string{}
	for _, role := range roles {
		if b := role.botID(); b != "" && role.ID != "" {
			m[role.ID] = b
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[guild] = m
}

// put records a created or updated role (a role whose tags changed is
// taken off).
func (r *managedRoles) put(guild string, role roleJSON) {
	if guild == "" || role.ID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, known := r.m[guild]
	if !known {
		// Only this role is known; the next message that needs the
		// others reads the guild.
		return
	}
	if b := role.botID(); b != "" {
		m[role.ID] = b
	} else {
		delete(m, role.ID)
	}
}

func (r *managedRoles) drop(guild, role string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m[guild], role)
}

func (r *managedRoles) dropGuild(guild string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, guild)
}

// of returns guild's roles managed for the bot user self (nil: none), and
// whether the guild's roles are known.
func (r *managedRoles) of(guild, self string) (map[string]bool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, known := r.m[guild]
	var out map[string]bool
	for role, bot := range m {
		if bot == self && self != "" {
			if out == nil {
				out = map[string]bool{}
			}
			out[role] = true
		}
	}
	return out, known
}

// botRolesOf returns the roles of guild that are the bot's own, reading the
// guild (GET guilds/{id}, which also refreshes the admin cache) when the
// gateway has not told them. A guild that cannot be read has none.
func (a *Adapter) botRolesOf(ctx context.Context, guild string) map[string]bool {
	self := a.identity().userID
	if guild == "" || self == "" {
		return nil
	}
	if out, known := a.roles.of(guild, self); known {
		return out
	}
	if _, err := a.fetchGuild(ctx, guild); err != nil {
		a.log.Debug("discord: guild roles lookup failed", "guild", guild, "err", err)
		return nil
	}
	out, _ := a.roles.of(guild, self)
	return out
}

// fetchGuild is GET guilds/{id}: the owner and roles' permissions for the
// admin check, and the managed roles.
func (a *Adapter) fetchGuild(ctx context.Context, id string) (guildInfo, error) {
	raw, err := a.sess.Request("GET", discordgo.EndpointGuild(id), nil, discordgo.WithContext(ctx))
	if err != nil {
		return guildInfo{}, fmt.Errorf("discord: guild %s: %w", id, err)
	}
	var g struct {
		OwnerID string     `json:"owner_id"`
		Roles   []roleJSON `json:"roles"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return guildInfo{}, fmt.Errorf("discord: guild %s: %w", id, err)
	}
	gi := guildInfo{owner: g.OwnerID, roles: map[string]int64{}}
	for _, r := range g.Roles {
		gi.roles[r.ID] = int64(r.Permissions)
	}
	a.guilds.put(id, gi)
	a.roles.setGuild(id, g.Roles)
	return gi, nil
}
