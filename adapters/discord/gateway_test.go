package discord

import (
	"fmt"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
)

// IDENTIFY must ask for the message intents explicitly: without
// MESSAGE_CONTENT untagged follow-ups arrive empty and are silently lost.
func TestIdentifyRequestsMessageIntents(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	startAdapter(t, f, newRecorder().deliver)
	ids := f.Identifies()
	if len(ids) != 1 {
		t.Fatalf("%d IDENTIFYs, want 1", len(ids))
	}
	for name, bit := range map[string]discordgo.Intent{
		"GUILDS": discordgo.IntentsGuilds, "GUILD_MESSAGES": discordgo.IntentsGuildMessages,
		"DIRECT_MESSAGES": discordgo.IntentsDirectMessages, "MESSAGE_CONTENT": discordgo.IntentsMessageContent,
	} {
		if ids[0].Intents&int(bit) == 0 {
			t.Errorf("IDENTIFY intents %b lack %s", ids[0].Intents, name)
		}
	}
	if ids[0].Token != "Bot test-token" && ids[0].Token != "test-token" {
		t.Errorf("IDENTIFY token %q", ids[0].Token)
	}
}

// A wrong token fails Run loudly instead of leaving a silent bot.
func TestWrongTokenFailsRun(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a, err := New(Config{BotToken: "wrong", APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(t.Context(), newRecorder().deliver); err == nil {
		t.Fatal("Run with a rejected token returned nil")
	}
}

// After op 7, a dropped socket or a resumable INVALID_SESSION the session
// RESUMEs at resume_gateway_url with its session id and last sequence, and
// every message — before, during the gap, after — is delivered exactly
// once, in order, even when Discord's replay overlaps what was delivered.
func TestResumeLosesAndDoublesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(f *discordfake.Server)
	}{
		{"reconnect op 7", (*discordfake.Server).Reconnect},
		{"dropped socket", (*discordfake.Server).Drop},
		{"resumable invalid session", func(f *discordfake.Server) { f.InvalidSession(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, discordfake.Config{ReplayOverlap: 3})
			rec := newRecorder()
			startAdapter(t, f, rec.deliver)
			say := func(i int) { f.Say(discordfake.Msg{Channel: general, Author: alice, Content: fmt.Sprintf("m%d", i)}) }
			say(1)
			say(2)
			rec.waitFor(t, "m1, m2", func() bool { return len(rec.events()) == 2 })

			tc.break_(f)
			say(3) // dispatched while the client is away: replayed on resume
			say(4)
			if !f.Wait(10*time.Second, func() bool {
				rs := f.ResumesLocked()
				return len(rs) > 0 && rs[len(rs)-1].Accepted
			}) {
				t.Fatalf("no accepted RESUME; resumes %+v identifies %+v", f.Resumes(), f.Identifies())
			}
			say(5)
			rec.waitFor(t, "m1..m5", func() bool { return len(rec.events()) >= 5 })

			r := f.Resumes()[len(f.Resumes())-1]
			if r.Path != "/resume" {
				t.Errorf("resumed at %s, want the resume_gateway_url (/resume)", r.Path)
			}
			if r.Replayed < 2 {
				t.Errorf("replayed %d events, want the 2 sent during the gap (and the overlap)", r.Replayed)
			}
			if n := len(f.Identifies()); n != 1 {
				t.Errorf("%d IDENTIFYs: the session was not resumed", n)
			}
			f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "last"})
			rec.waitFor(t, "last", func() bool { _, ok := rec.eventByText("last"); return ok })
			var got []string
			for _, e := range rec.events() {
				got = append(got, e.Text)
			}
			want := []string{"m1", "m2", "m3", "m4", "m5", "last"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("delivered %v, want %v exactly once each", got, want)
			}
		})
	}
}

// A non-resumable INVALID_SESSION identifies afresh (at the gateway URL from
// GET gateway/bot) and keeps receiving.
func TestInvalidSessionIdentifiesAgain(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	f.InvalidSession(false)
	if !f.Wait(10*time.Second, func() bool { return len(f.IdentifiesLocked()) == 2 && f.ConnectedLocked() }) {
		t.Fatalf("no second IDENTIFY: %+v", f.Identifies())
	}
	if p := f.Identifies()[1].Path; p != "/gateway" {
		t.Errorf("re-identified at %s, want /gateway", p)
	}
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "after"})
	rec.waitFor(t, "after", func() bool { _, ok := rec.eventByText("after"); return ok })
}
