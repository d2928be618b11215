package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
)

// A first mention in a channel the bot never talked in (the journal names
// nothing), posted while no process held a session: the first IDENTIFY's
// GUILD_CREATE shows a message in ops newer than the thread window, so ops
// is read and the mention delivered, once. A live message in ops posted
// while that read is in flight waits and follows it, in Discord's order;
// one in another channel is not held up. Channels without a recent
// message are not read. (Before, ops was never read and the mention was
// lost.)
func TestFirstIdentifyReadsAChannelNewToTheBot(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	bot := f.Bot().ID
	first := f.Say(discordfake.Msg{Channel: ops, Author: alice, Content: "<@" + bot + "> first ever"}) // no session
	entered, release := f.Stall("GET", "channels/"+ops+"/messages")
	t.Cleanup(release)
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver, WithGapSource(staticGaps{}))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("ops was never read; calls %+v", f.Calls())
	}
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "live in ops"})
	f.Say(discordfake.Msg{Channel: general, Author: bob, Content: "live in general"})
	rec.waitFor(t, "live in general, not held behind ops", func() bool { _, ok := rec.eventByText("live in general"); return ok })
	awaitHold(t, a, rec, 1, 0, 1) // live in ops waits for ops's gap
	release()
	rec.waitFor(t, "ops's messages", func() bool { return len(textsIn(rec, ops)) == 2 })
	awaitGapFills(t, a, 1)
	if got, want := textsIn(rec, ops), []string{"first ever", "live in ops"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ops delivered %q, want %q exactly once each, in order", got, want)
	}
	if ev, _ := rec.eventByText("first ever"); ev.MessageID != first || !ev.MentionsBot {
		t.Errorf("the first mention delivered as %+v", ev)
	}
	for _, c := range f.Calls() {
		for _, ch := range []string{general, secret, oldThread, privThr} {
			if c.Method == "GET" && strings.HasPrefix(c.Path, "channels/"+ch+"/messages") {
				t.Errorf("read %s: no message there since the window", c.Path)
			}
		}
	}
}

// A guild READY lists whose GUILD_CREATE never comes (an outage) does not
// stall the gap fill: after Config.GapGuildWait it reads what it has, and
// live messages, held meanwhile, follow.
func TestGapFillStopsWaitingForAGuildThatNeverComes(t *testing.T) {
	const lost = "300000000000000099"
	ready, _ := json.Marshal(map[string]any{
		"v": 10, "user": map[string]any{"id": "100000000000000001", "username": "marlowe", "bot": true},
		"guilds": []any{map[string]any{"id": guildID, "unavailable": true}, map[string]any{"id": lost, "unavailable": true}},
	})
	f := newFake(t, discordfake.Config{Ready: ready})
	bot := f.Bot().ID
	f.Say(discordfake.Msg{Channel: ops, Author: alice, Content: "<@" + bot + "> while down"})
	rec := newRecorder()
	a := startAdapterConfig(t, f, Config{GapGuildWait: 300 * time.Millisecond}, rec.deliver, WithGapSource(staticGaps{}))
	f.Say(discordfake.Msg{Channel: ops, Author: bob, Content: "live"})
	rec.waitFor(t, "both", func() bool { return len(rec.events()) == 2 })
	awaitGapFills(t, a, 1)
	if got, want := textsIn(rec, ops), []string{"while down", "live"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ops delivered %q, want %q", got, want)
	}
}

// The scan keeps only channels with messages of their own whose last
// message is newer than the floor, from guilds READY listed, newest
// first, bounded.
func TestGuildScan(t *testing.T) {
	const floor = "1000"
	ch := func(id string, typ discordgo.ChannelType, last string) *discordgo.Channel {
		return &discordgo.Channel{ID: id, Type: typ, LastMessageID: last}
	}
	tests := []struct {
		name   string
		guilds []*discordgo.Guild
		n      int
		want   []string
		miss   int
	}{
		{"recent text channels and threads, newest first", []*discordgo.Guild{{ID: "1",
			Channels: []*discordgo.Channel{ch("10", discordgo.ChannelTypeGuildText, "2000"), ch("11", discordgo.ChannelTypeGuildNews, "3000")},
			Threads:  []*discordgo.Channel{ch("12", discordgo.ChannelTypeGuildPublicThread, "2500")},
		}}, 10, []string{"11", "12", "10"}, 0},
		{"at or before the floor, or none", []*discordgo.Guild{{ID: "1", Channels: []*discordgo.Channel{
			ch("10", discordgo.ChannelTypeGuildText, "1000"), ch("11", discordgo.ChannelTypeGuildText, "999"),
			ch("12", discordgo.ChannelTypeGuildText, ""), ch("13", discordgo.ChannelTypeGuildText, "2000"),
		}}}, 10, []string{"13"}, 0},
		{"no messages of their own", []*discordgo.Guild{{ID: "1", Channels: []*discordgo.Channel{
			ch("10", discordgo.ChannelTypeGuildCategory, "2000"), ch("11", discordgo.ChannelTypeGuildForum, "2000"),
			ch("12", discordgo.ChannelTypeGuildMedia, "2000"), ch("13", discordgo.ChannelTypeGuildVoice, "2000"),
		}}}, 10, []string{"13"}, 0},
		{"a guild READY did not list, or unavailable", []*discordgo.Guild{
			{ID: "9", Channels: []*discordgo.Channel{ch("90", discordgo.ChannelTypeGuildText, "2000")}},
			{ID: "2", Unavailable: true, Channels: []*discordgo.Channel{ch("20", discordgo.ChannelTypeGuildText, "2000")}},
		}, 10, []string{}, 2},
		{"bounded", []*discordgo.Guild{{ID: "1", Channels: []*discordgo.Channel{
			ch("10", discordgo.ChannelTypeGuildText, "2000"), ch("11", discordgo.ChannelTypeGuildText, "4000"),
			ch("12", discordgo.ChannelTypeGuildText, "3000"),
		}}}, 2, []string{"11", "12"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newGuildScan([]string{"1", "2"}, floor)
			s.add(&discordgo.Guild{ID: "2"}) // an empty guild: created
			if tt.miss == 2 {
				s = newGuildScan([]string{"1", "2"}, floor)
			}
			for _, g := range tt.guilds {
				s.add(g)
			}
			got, missing := s.wait(context.Background(), time.Millisecond, tt.n)
			ids := []string{}
			for _, c := range got {
				ids = append(ids, c.Channel)
				if !c.listed || c.After != "" {
					t.Errorf("%+v: want listed, read from the floor", c)
				}
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.want) || missing != tt.miss {
				t.Fatalf("got %v (%d guilds missing), want %v (%d)", ids, missing, tt.want, tt.miss)
			}
		})
	}
}
