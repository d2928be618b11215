package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// Every captured payload in ../shared/discord-payloads/ (none written by
// this project) played to the real adapter: dispatches through the fake
// gateway, HTTP/gateway interaction objects through handleInteraction,
// control frames on the socket, READYs as a session's READY. What each
// must become is written from the rules (ARCHITECTURE.md §5 and the
// Discord column of the mapping, PLATFORMS.md), then checked through the
// intent filter. A file without a row here fails the test, so a payload
// added to the folder needs its expectation written.

// pwant is what a delivered message must be.
type pwant struct {
	vis                     core.Visibility
	workspace, channel      string
	thread                  string
	mentions                string // kinds, e.g. "user group"
	mentionsBot, replyToBot bool
	isBot                   bool
	subtype                 string
	reason                  string // the filter's decision, no window open
}

// pcase is one way of playing a payload file.
type pcase struct {
	file string
	name string // variant, when a file is played more than once
	// bot, when set, is the id in the payload that stands for our bot: it
	// is replaced by the fake's bot id everywhere in the payload.
	bot  string
	want *pwant // MESSAGE_CREATE: nil = must not be delivered
	// check, for what is not a message: run after the payload was played.
	check func(t *testing.T, e *pEnv)
}

// pchan is a channel the table declares, as the captured session had it.
type pchan struct {
	id, guild string
	typ       int
}

const (
	ourBot     = "100000000000000001"
	someGuild  = "900000000000000001" // a guild for REST-shaped messages that name none
	sentinelCh = general
)

// Channels of the captured messages. A channel the table leaves out is
// unknown to Discord (GET channels/{id} is 404).
var payloadChannels = []pchan{
	{id: "727947198481956945", guild: "694205451682978886"},
	{id: "563557393640849437", guild: "185949590652977152"},
	{id: "680839020124700740", guild: "123456789012345678"},
	{id: "452526315288133646", guild: "452526315288133644"},
	{id: "384091456408911874", guild: someGuild},
	{id: "1088465252804481025", guild: "405699020564987914"},
	{id: "278314058422157320", guild: someGuild},
	// The 2017 guild's default channel: its id is the guild's (as then).
	{id: "244567637332328449", guild: "244567637332328449"},
	{id: "290926798999357250", guild: someGuild},
	{id: "909072028911423498", guild: someGuild},
	{id: "1029316811088478299", typ: discordfake.TypeDM},
	{id: "486833041486905347", guild: "486833041486905345"},
	{id: "123456789012345678", guild: "123456789012345678"},
	{id: "185949590652977152", guild: "123456789012345678"},
	{id: "562045950537891842", guild: "123456789012345678"},
}

func person(ws, ch, reason string) *pwant {
	return &pwant{vis: core.Public, workspace: ws, channel: ch, reason: reason}
}

func notPerson(ws, ch string) *pwant {
	return &pwant{vis: core.Public, workspace: ws, channel: ch, isBot: true, reason: "not-a-person-message"}
}

var payloadCases = []pcase{
	// Messages.
	{file: "d4j-message-create-guild-text.json", want: person("694205451682978886", "727947198481956945", "no-window")},
	{file: "d4j-message-create-reply-to-bot-embed.json", name: "to our bot", bot: "344487830824943618",
		want: &pwant{vis: core.Public, workspace: "185949590652977152", channel: "563557393640849437", mentions: "user", mentionsBot: true, replyToBot: true, reason: "mention"}},
	{file: "d4j-message-create-reply-to-bot-embed.json", name: "to another bot",
		want: &pwant{vis: core.Public, workspace: "185949590652977152", channel: "563557393640849437", mentions: "user", reason: "addressed-to-others"}},
	{file: "d4j-message-create-type6-pin-system.json",
		want: &pwant{vis: core.Public, workspace: "123456789012345678", channel: "680839020124700740", subtype: "pinned_item", reason: "not-a-person-message"}},
	{file: "rem-message-create-plain.json", want: person("452526315288133644", "452526315288133646", "no-window")},
	{file: "rem-message-create-user-mention.json", name: "another user",
		want: &pwant{vis: core.Public, workspace: "452526315288133644", channel: "452526315288133646", mentions: "user", reason: "addressed-to-others"}},
	{file: "rem-message-create-user-mention.json", name: "our bot", bot: "135347310845624320",
		want: &pwant{vis: core.Public, workspace: "452526315288133644", channel: "452526315288133646", mentions: "user", mentionsBot: true, reason: "mention"}},
	// Without guild_id: the channel says where they are, not "a DM".
	{file: "ser-message-create-2017.json", want: person("244567637332328449", "244567637332328449", "no-window")},
	{file: "dad-message-example-reactions.json", want: person(someGuild, "290926798999357250", "no-window")},
	{file: "d4j-rest-message-legacy-sticker.json", want: person(someGuild, "278314058422157320", "no-window")},
	{file: "dgd-message-create-invite-link.json", // channel unknown: fail closed
		want: &pwant{vis: core.Private, channel: "409359688258551850", reason: "private-no-window"}},
	{file: "udoc-message-create-modern-user.json", want: &pwant{vis: core.DM, channel: "1029316811088478299", reason: "dm"}},
	// Bots, webhooks, crossposts, our own echo.
	{file: "d4j-rest-bot-message-user-mention.json", name: "our echo", bot: "344487830824943618",
		want: &pwant{vis: core.Public, workspace: someGuild, channel: "384091456408911874", mentions: "user", isBot: true, reason: "not-a-person-message"}},
	{file: "d4j-rest-bot-message-user-mention.json", name: "another bot mentioning us", bot: "134127815531560960",
		want: &pwant{vis: core.Public, workspace: someGuild, channel: "384091456408911874", mentions: "user", mentionsBot: true, isBot: true, reason: "not-a-person-message"}},
	{file: "d4j-rest-message-forward-snapshot.json", want: notPerson("405699020564987914", "1088465252804481025")},
	{file: "ser-message-create-bot-embed-2017.json", want: notPerson("244567637332328449", "244567637332328449")},
	{file: "dad-message-crossposted.json", want: notPerson(someGuild, "290926798999357250")},
	{file: "udoc-message-create-crosspost-webhook.json", want: notPerson(someGuild, "909072028911423498")},
	// Edits, deletions, reactions, typing, joins, RESUMED: nothing delivered.
	{file: "d4j-message-update-embed-only.json"},
	{file: "d4j-message-update-full-pinned.json"},
	{file: "rem-message-update-edit.json"},
	{file: "ser-message-update-2017.json"},
	{file: "dgd-message-update-edited.json"},
	{file: "d4j-message-delete.json"},
	{file: "d4j-message-reaction-add.json"},
	{file: "d4j-message-reaction-remove.json"},
	{file: "d4j-typing-start.json"},
	{file: "d4j-guild-member-add.json"},
	{file: "twl-resumed.json"},
	{file: "udoc-resumed.json"},
	// Guilds and channels: learnt, nothing delivered.
	{file: "d4j-guild-create.json", bot: "183312554389405697", check: func(t *testing.T, e *pEnv) {
		if roles, _ := e.a.roles.of("135197118292819968", ourBot); !roles["266885684395114496"] {
			t.Errorf("the bot's managed role (tags.bot_id) was not learnt: %v", roles)
		}
		if roles, _ := e.a.roles.of("135197118292819968", ourBot); roles["136965497303334912"] {
			t.Error("a role merely named \"bot\" was taken for the bot's")
		}
	}},
	{file: "d4j-guild-create-unavailable.json", check: func(t *testing.T, e *pEnv) {
		if _, known := e.a.roles.of("772862920081801217", ourBot); known {
			t.Error("an unavailable guild's (absent) roles were recorded as known")
		}
	}},
	{file: "d4j-channel-create.json", check: func(t *testing.T, e *pEnv) {
		e.wantPlace(t, "123456789012345678", "680839020124700740", "680839020124700740", "", core.Public)
	}},
	{file: "dgd-channel-create-in-category.json", check: func(t *testing.T, e *pEnv) {
		// A category is not a thread: the channel is at the top.
		e.wantPlace(t, "486833041486905345", "530091204952457216", "530091204952457216", "", core.Public)
	}},
	{file: "dad-thread-create-example.json", check: func(t *testing.T, e *pEnv) {
		// A thread of its parent (the docs example's ids are all one);
		// a parent nobody knows makes it private, the stricter reading.
		e.wantPlace(t, "41771983423143937", "41771983423143937", "41771983423143937", "41771983423143937", core.Private)
	}},
	// Interactions: only a button press is a card click.
	{file: "dad-interaction-button-click.json", check: func(t *testing.T, e *pEnv) {
		clicks := e.rec.clicks()
		if len(clicks) == 0 || clicks[len(clicks)-1].Token != "click_one" || clicks[len(clicks)-1].By.ID != "53908232506183680" {
			t.Fatalf("button press not delivered as a click by its member: %+v", clicks)
		}
		e.wantResponse(t, discordgo.InteractionResponseDeferredMessageUpdate)
	}},
	{file: "dad-interaction-select-menu.json", check: refused},
	{file: "dad-interaction-slash-command.json", check: refused},
	{file: "dad-interaction-user-command.json", check: refused},
	{file: "dad-interaction-message-command.json", check: refused},
	{file: "d4j-interaction-create-slash-resolved.json", check: refused},
	{file: "d4j-interaction-create-subcommand-group.json", check: refused},
	// Control frames on a live session.
	{file: "d4j-hello.json", check: func(t *testing.T, e *pEnv) { e.wantSession(t, 0, 0) }},
	{file: "d4j-heartbeat-ack.json", check: func(t *testing.T, e *pEnv) { e.wantSession(t, 0, 0) }},
	{file: "d4j-reconnect.json", check: func(t *testing.T, e *pEnv) { e.wantSession(t, 0, 1) }},
	{file: "d4j-invalid-session.json", check: func(t *testing.T, e *pEnv) { e.wantSession(t, 1, 0) }},
	// READYs: played as the session's own (see TestCapturedReadys).
	{file: "d4j-ready-bot.json"},
	{file: "dgd-ready-v6.json"},
	{file: "ser-ready-2017-private-channel.json"},
}

// pEnv is the shared fake and adapter the table plays to.
type pEnv struct {
	f    *discordfake.Server
	a    *Adapter
	rec  *recorder
	n    int
	mu   sync.Mutex
	resp []*discordgo.InteractionResponse
	// identifies and resumes before the case.
	ids, res int
}

func (e *pEnv) wantPlace(t *testing.T, guild, channel, wantChannel, wantThread string, vis core.Visibility) {
	t.Helper()
	w := e.a.locate(context.Background(), guild, channel)
	if w.scope.Channel != wantChannel || w.scope.Thread != wantThread || w.vis != vis || w.scope.Workspace != guild {
		t.Errorf("a message in %s is placed at %+v %s, want channel %s thread %q %s", channel, w.scope, w.vis, wantChannel, wantThread, vis)
	}
}

func (e *pEnv) lastResponse() *discordgo.InteractionResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.resp) == 0 {
		return nil
	}
	return e.resp[len(e.resp)-1]
}

func (e *pEnv) wantResponse(t *testing.T, typ discordgo.InteractionResponseType) {
	t.Helper()
	if r := e.lastResponse(); r == nil || r.Type != typ {
		t.Errorf("interaction answered %+v, want type %d", r, typ)
	}
}

// refused: not delivered, answered with an ephemeral note.
func refused(t *testing.T, e *pEnv) {
	t.Helper()
	r := e.lastResponse()
	if r == nil || r.Type != discordgo.InteractionResponseChannelMessageWithSource || r.Data == nil || r.Data.Flags&discordgo.MessageFlagsEphemeral == 0 {
		t.Errorf("interaction answered %+v, want an ephemeral note", r)
	}
}

// wantSession: after a control frame, the session identified and resumed
// this many more times, and is live.
func (e *pEnv) wantSession(t *testing.T, identifies, resumes int) {
	t.Helper()
	if !e.f.Wait(10*time.Second, func() bool {
		return len(e.f.IdentifiesLocked()) == e.ids+identifies && len(e.f.ResumesLocked()) == e.res+resumes && e.f.ConnectedLocked()
	}) {
		t.Errorf("identifies %d resumes %d after the frame, want %d and %d more", len(e.f.Identifies())-e.ids, len(e.f.Resumes())-e.res, identifies, resumes)
	}
}

// readPayload returns a file's frame with the bot substituted.
func readPayload(t *testing.T, dir string, c pcase) (frame map[string]json.RawMessage, raw []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, c.file))
	if err != nil {
		t.Fatal(err)
	}
	if c.bot != "" {
		raw = []byte(strings.ReplaceAll(string(raw), `"`+c.bot+`"`, `"`+ourBot+`"`))
		raw = []byte(strings.ReplaceAll(string(raw), "<@"+c.bot+">", "<@"+ourBot+">"))
	}
	if err := json.Unmarshal(raw, &frame); err != nil {
		t.Fatal(err)
	}
	return frame, raw
}

func TestCapturedDiscordPayloads(t *testing.T) {
	dir := sharedFolder(t, "discord-payloads")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, c := range payloadCases {
		covered[c.file] = true
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no row in payloadCases: write what the rules say it must become", filepath.Base(f))
		}
		delete(covered, filepath.Base(f))
	}
	for f := range covered {
		t.Errorf("payloadCases names %s, which is not in %s", f, dir)
	}

	f := newFake(t, discordfake.Config{Bot: discordfake.User{ID: ourBot, Username: "marlowe"}})
	e := &pEnv{f: f, rec: newRecorder()}
	e.a = startAdapter(t, f, e.rec.deliver)
	for _, ch := range payloadChannels {
		f.AddChannel(ch.guild, discordfake.Channel{ID: ch.id, Type: ch.typ})
	}
	ctx := context.Background()
	for _, c := range payloadCases {
		name := strings.TrimSuffix(c.file, ".json")
		if c.name != "" {
			name += "/" + c.name
		}
		t.Run(name, func(t *testing.T) {
			e.n++
			fresh := fmt.Sprint(1500000000000000000 + e.n)
			frame, raw := readPayload(t, dir, c)
			var op int
			var typ string
			_ = json.Unmarshal(frame["op"], &op)
			_ = json.Unmarshal(frame["t"], &typ)
			e.ids, e.res = len(f.Identifies()), len(f.Resumes())
			switch {
			case strings.Contains(c.file, "-ready-"):
				return // TestCapturedReadys
			case frame["op"] == nil: // an HTTP interaction object
				e.interaction(ctx, t, raw)
			case op == 0 && typ == "INTERACTION_CREATE":
				e.interaction(ctx, t, frame["d"])
			case op != 0:
				f.SendFrame(raw)
			default:
				e.dispatch(t, typ, frame["d"], fresh, c.want)
			}
			if c.check != nil {
				c.check(t, e)
			}
		})
	}
}

// interaction plays an interaction object as both paths do.
func (e *pEnv) interaction(ctx context.Context, t *testing.T, raw []byte) {
	t.Helper()
	var i discordgo.Interaction
	if err := json.Unmarshal(raw, &i); err != nil {
		t.Fatalf("interaction: %v", err)
	}
	before := len(e.rec.clicks())
	e.a.handleInteraction(ctx, &i, func(_ context.Context, _ *discordgo.Interaction, r *discordgo.InteractionResponse) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.resp = append(e.resp, r)
		return nil
	})
	if i.Type != discordgo.InteractionMessageComponent || i.MessageComponentData().ComponentType != discordgo.ButtonComponent {
		if n := len(e.rec.clicks()); n != before {
			t.Errorf("a %v interaction was delivered as a click", i.Type)
		}
	}
}

// dispatch plays one DISPATCH and checks what was delivered.
func (e *pEnv) dispatch(t *testing.T, typ string, d json.RawMessage, fresh string, want *pwant) {
	t.Helper()
	var m map[string]json.RawMessage
	_ = json.Unmarshal(d, &m)
	var channel string
	_ = json.Unmarshal(m["channel_id"], &channel)
	if typ == "MESSAGE_CREATE" {
		// A fresh id: two captures share one.
		m["id"], _ = json.Marshal(fresh)
		d, _ = json.Marshal(m)
	}
	before := len(e.rec.events())
	e.f.Dispatch(typ, d)
	if want == nil {
		// A sentinel in the same channel (same shard, so after it).
		if !slices.ContainsFunc(payloadChannels, func(c pchan) bool { return c.id == channel }) {
			channel = sentinelCh
		}
		sentinel := e.f.Say(discordfake.Msg{Channel: channel, Author: alice, Content: "sentinel " + fresh})
		e.rec.waitFor(t, "the sentinel", func() bool { return e.delivered(sentinel) != nil })
		if evs := e.rec.events()[before:]; len(evs) != 1 {
			t.Errorf("%s was delivered: %+v", typ, evs[:len(evs)-1])
		}
		return
	}
	e.rec.waitFor(t, "the message", func() bool { return e.delivered(fresh) != nil })
	ev := *e.delivered(fresh)
	var kinds []string
	for _, mn := range ev.Mentions {
		kinds = append(kinds, string(mn.Kind))
	}
	got := fmt.Sprintf("vis=%s ws=%s ch=%s thread=%s mentions=%q bot=%v reply=%v isbot=%v sub=%q",
		ev.Visibility, ev.Scope.Workspace, ev.Scope.Channel, ev.Scope.Thread, strings.Join(kinds, " "), ev.MentionsBot, ev.ReplyToBot, ev.Author.IsBot, ev.Subtype)
	exp := fmt.Sprintf("vis=%s ws=%s ch=%s thread=%s mentions=%q bot=%v reply=%v isbot=%v sub=%q",
		want.vis, want.workspace, want.channel, want.thread, want.mentions, want.mentionsBot, want.replyToBot, want.isBot, want.subtype)
	if got != exp {
		t.Errorf("normalised\n got %s\nwant %s", got, exp)
	}
	if ev.Author.ID == "" || ev.At.IsZero() || ev.Scope.Platform != Platform {
		t.Errorf("author/time/platform missing: %+v", ev)
	}
	if d := intent.Decide(ev, intent.Windows{}, time.Now()); d.Reason.String() != want.reason {
		t.Errorf("decision %s, want %s", d.Reason, want.reason)
	}
}

func (e *pEnv) delivered(id string) *core.Event {
	for _, ev := range e.rec.events() {
		if ev.MessageID == id {
			return &ev
		}
	}
	return nil
}

// Each captured READY, as the READY of a session: the bot is the READY's
// user, and the session delivers (a DM) and resumes after op 7 without a
// new IDENTIFY (two of them carry no resume_gateway_url).
func TestCapturedReadys(t *testing.T) {
	dir := sharedFolder(t, "discord-payloads")
	for _, file := range []string{"d4j-ready-bot.json", "dgd-ready-v6.json", "ser-ready-2017-private-channel.json"} {
		t.Run(strings.TrimSuffix(file, ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				D struct {
					User      discordfake.User `json:"user"`
					ResumeURL string           `json:"resume_gateway_url"`
				} `json:"d"`
			}
			if err := json.Unmarshal(raw, &r); err != nil || r.D.User.ID == "" {
				t.Fatalf("READY: %v", err)
			}
			f := newFake(t, discordfake.Config{Bot: r.D.User, Ready: raw})
			rec := newRecorder()
			a := startAdapter(t, f, rec.deliver)
			f.Say(discordfake.Msg{Channel: "400000000000000001", Author: alice, Content: "hello"})
			rec.waitFor(t, "a DM", func() bool { _, ok := rec.eventByText("hello"); return ok })
			if id := a.identity(); id.userID != r.D.User.ID {
				t.Errorf("identity %+v, want the READY's user %s", id, r.D.User.ID)
			}
			if r.D.ResumeURL != "" {
				return // a real Discord URL: not dialled from a test
			}
			f.Reconnect()
			f.Say(discordfake.Msg{Channel: "400000000000000001", Author: alice, Content: "during"})
			rec.waitFor(t, "the DM sent during op 7", func() bool { _, ok := rec.eventByText("during"); return ok })
			if n := len(f.Identifies()); n != 1 {
				t.Errorf("%d IDENTIFYs after op 7, want the session resumed", n)
			}
		})
	}
}
