package intent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

var t0 = time.Date(2025, time.March, 3, 9, 0, 0, 0, time.UTC)

// ev returns a plain public top-level message from U1 in slack/T1/C1.
func ev(mod ...func(*core.Event)) core.Event {
	e := core.Event{
		Scope:      core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"},
		Visibility: core.Public,
		MessageID:  "m1",
		Author:     core.Person{ID: "U1", Name: "Ada"},
		Text:       "hello",
		At:         t0,
	}
	for _, m := range mod {
		m(&e)
	}
	return e
}

func inThread(e *core.Event)    { e.Scope.Thread = "root" }
func private(e *core.Event)     { e.Visibility = core.Private }
func dm(e *core.Event)          { e.Visibility = core.DM }
func byBot(e *core.Event)       { e.Author.IsBot = true }
func mentionsBot(e *core.Event) { e.MentionsBot = true }
func replyToBot(e *core.Event)  { e.ReplyTo, e.ReplyToBot = "b1", true }
func subtype(s string) func(*core.Event) {
	return func(e *core.Event) { e.Subtype = s }
}
func author(id string) func(*core.Event) {
	return func(e *core.Event) { e.Author.ID = id }
}
func mentions(ms ...core.Mention) func(*core.Event) {
	return func(e *core.Event) { e.Mentions = ms }
}
func visibility(v core.Visibility) func(*core.Event) {
	return func(e *core.Event) { e.Visibility = v }
}

var (
	user      = core.Mention{Kind: core.MentionUser, ID: "U3"}
	group     = core.Mention{Kind: core.MentionGroup, ID: "S-oncall"}
	here      = core.Mention{Kind: core.MentionBroadcast, ID: "here"}
	channel   = core.Mention{Kind: core.MentionBroadcast, ID: "channel"}
	everyone  = core.Mention{Kind: core.MentionBroadcast, ID: "everyone"}
	botAsUser = core.Mention{Kind: core.MentionUser, ID: "UBOT"}
)

// open windows: thread open for 10 more minutes, U1 holds the top-level one.
var (
	noWindows   = Windows{}
	threadOpen  = Windows{ThreadUntil: t0.Add(10 * time.Minute)}
	topOpenU1   = Windows{Toplevel: Toplevel{Person: "U1", At: t0.Add(-time.Minute), Until: t0.Add(5 * time.Minute)}}
	bothOpenU1  = Windows{ThreadUntil: threadOpen.ThreadUntil, Toplevel: topOpenU1.Toplevel}
	threadEnded = Windows{ThreadUntil: t0}
	topEndedU1  = Windows{Toplevel: Toplevel{Person: "U1", At: t0.Add(-6 * time.Minute), Until: t0}}
)

type decideCase struct {
	name string
	ev   core.Event
	w    Windows
	now  time.Time
	want Reason
}

func decideCases() []decideCase {
	return []decideCase{
		// Rule 1: not a person's message, whatever else holds.
		{"bot", ev(byBot), bothOpenU1, t0, ReasonNotAPersonMessage},
		{"bot mentioning us", ev(byBot, mentionsBot), noWindows, t0, ReasonNotAPersonMessage},
		{"bot in DM", ev(byBot, dm), noWindows, t0, ReasonNotAPersonMessage},
		{"bot replying to us", ev(byBot, replyToBot), noWindows, t0, ReasonNotAPersonMessage},
		{"bot in open thread", ev(byBot, inThread), threadOpen, t0, ReasonNotAPersonMessage},
		{"edit with mention", ev(subtype("edit"), mentionsBot), noWindows, t0, ReasonNotAPersonMessage},
		{"delete in open thread", ev(subtype("delete"), inThread), threadOpen, t0, ReasonNotAPersonMessage},
		{"join", ev(subtype("join")), topOpenU1, t0, ReasonNotAPersonMessage},
		{"edit in DM", ev(subtype("edit"), dm), noWindows, t0, ReasonNotAPersonMessage},
		{"no verified author", ev(author(""), mentionsBot), noWindows, t0, ReasonNotAPersonMessage},
		// Rule 2: DMs.
		{"dm", ev(dm), noWindows, t0, ReasonDM},
		{"dm mentioning others", ev(dm, mentions(user, here)), noWindows, t0, ReasonDM},
		{"dm mentioning bot", ev(dm, mentionsBot), noWindows, t0, ReasonDM},
		{"dm in thread", ev(dm, inThread), noWindows, t0, ReasonDM},
		// Rule 3: mention or reply to the bot.
		{"mention", ev(mentionsBot), noWindows, t0, ReasonMention},
		{"mention plus others", ev(mentionsBot, mentions(user, group, here)), noWindows, t0, ReasonMention},
		{"mention plus bot listed", ev(mentionsBot, mentions(botAsUser)), noWindows, t0, ReasonMention},
		{"mention in private", ev(mentionsBot, private), noWindows, t0, ReasonMention},
		{"mention in thread", ev(mentionsBot, inThread), noWindows, t0, ReasonMention},
		{"mention and reply", ev(mentionsBot, replyToBot), noWindows, t0, ReasonMention},
		{"reply to bot", ev(replyToBot), noWindows, t0, ReasonReplyToBot},
		{"reply to bot in private", ev(replyToBot, private), noWindows, t0, ReasonReplyToBot},
		{"reply to bot addressing others", ev(replyToBot, mentions(user)), noWindows, t0, ReasonReplyToBot},
		{"reply to a person", ev(func(e *core.Event) { e.ReplyTo = "m0" }), noWindows, t0, ReasonNoWindow},
		// Rule 4: addressed to others.
		{"other user in open thread", ev(inThread, mentions(user)), threadOpen, t0, ReasonAddressedToOthers},
		{"group in open thread", ev(inThread, mentions(group)), threadOpen, t0, ReasonAddressedToOthers},
		{"here at top, holder", ev(mentions(here)), topOpenU1, t0, ReasonAddressedToOthers},
		{"channel", ev(mentions(channel)), noWindows, t0, ReasonAddressedToOthers},
		{"everyone", ev(mentions(everyone)), noWindows, t0, ReasonAddressedToOthers},
		{"other user in private", ev(private, mentions(user)), noWindows, t0, ReasonAddressedToOthers},
		{"unknown mention kind", ev(mentions(core.Mention{Kind: "role", ID: "R1"})), topOpenU1, t0, ReasonAddressedToOthers},
		// Rule 5: private channels.
		{"private in open thread", ev(private, inThread), threadOpen, t0, ReasonPrivateNoWindow},
		{"private top, holder", ev(private), topOpenU1, t0, ReasonPrivateNoWindow},
		{"private nothing", ev(private), noWindows, t0, ReasonPrivateNoWindow},
		{"empty visibility fails closed", ev(visibility("")), bothOpenU1, t0, ReasonPrivateNoWindow},
		{"unknown visibility fails closed", ev(visibility("secret")), bothOpenU1, t0, ReasonPrivateNoWindow},
		// Rule 6: thread window.
		{"thread open", ev(inThread), threadOpen, t0, ReasonThreadWindow},
		{"thread open, anyone", ev(inThread, author("U7")), threadOpen, t0, ReasonThreadWindow},
		{"thread last instant", ev(inThread), threadOpen, threadOpen.ThreadUntil.Add(-time.Nanosecond), ReasonThreadWindow},
		{"thread ends at until", ev(inThread), threadOpen, threadOpen.ThreadUntil, ReasonNoWindow},
		{"thread ended", ev(inThread), threadEnded, t0, ReasonNoWindow},
		{"thread none", ev(inThread), noWindows, t0, ReasonNoWindow},
		{"thread, only top open", ev(inThread), topOpenU1, t0, ReasonNoWindow},
		// Rule 7: top-level window.
		{"top holder", ev(), topOpenU1, t0, ReasonToplevelWindow},
		{"top holder, thread window irrelevant", ev(), bothOpenU1, t0, ReasonToplevelWindow},
		{"top someone else", ev(author("U2")), topOpenU1, t0, ReasonNoWindow},
		{"top last instant", ev(), topOpenU1, topOpenU1.Toplevel.Until.Add(-time.Nanosecond), ReasonToplevelWindow},
		{"top ends at until", ev(), topOpenU1, topOpenU1.Toplevel.Until, ReasonNoWindow},
		{"top ended", ev(), topEndedU1, t0, ReasonNoWindow},
		{"top, only thread open", ev(), threadOpen, t0, ReasonNoWindow},
		// Rule 8.
		{"nothing", ev(), noWindows, t0, ReasonNoWindow},
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.ev, tc.w, tc.now)
			want := Decision{Route: tc.want.Routes(), Reason: tc.want}
			if got != want {
				t.Fatalf("Decide = %v, want %v", got, want)
			}
			if !NeedsWindows(tc.ev) {
				if z := Decide(tc.ev, Windows{}, tc.now); z != got {
					t.Fatalf("NeedsWindows false but windows changed the decision: %v vs %v", z, got)
				}
			}
		})
	}
}

// TestEveryReasonIsProduced keeps the closed set honest: every reason is
// produced by some case, and every produced reason is declared.
func TestEveryReasonIsProduced(t *testing.T) {
	seen := map[Reason]bool{}
	for _, tc := range decideCases() {
		seen[Decide(tc.ev, tc.w, tc.now).Reason] = true
	}
	for _, r := range Reasons() {
		if !seen[r] {
			t.Errorf("reason %s is produced by no case", r)
		}
		delete(seen, r)
	}
	for r := range seen {
		t.Errorf("Decide produced undeclared reason %d", uint8(r))
	}
	if len(Reasons()) != NumReasons {
		t.Fatalf("Reasons() has %d, NumReasons = %d", len(Reasons()), NumReasons)
	}
}

func TestReasonText(t *testing.T) {
	want := []string{"dm", "mention", "reply-to-bot", "thread-window", "toplevel-window",
		"not-a-person-message", "addressed-to-others", "private-no-window", "no-window"}
	if len(want) != NumReasons {
		t.Fatalf("%d reasons, test knows %d", NumReasons, len(want))
	}
	for i, r := range Reasons() {
		if r.String() != want[i] {
			t.Errorf("reason %d = %q, want %q", i, r, want[i])
		}
		b, err := json.Marshal(r)
		if err != nil || string(b) != `"`+want[i]+`"` {
			t.Errorf("marshal %s = %s, %v", r, b, err)
		}
		var back Reason
		if err := json.Unmarshal(b, &back); err != nil || back != r {
			t.Errorf("unmarshal %s = %v, %v", b, back, err)
		}
		wantRoute := i < 5
		if r.Routes() != wantRoute {
			t.Errorf("%s.Routes() = %v", r, r.Routes())
		}
	}
	if _, err := ParseReason("maybe"); err == nil {
		t.Error("ParseReason accepted an unknown reason")
	}
	if _, err := json.Marshal(Reason(0)); err == nil {
		t.Error("marshalled the invalid reason")
	}
	if Reason(200).String() == "" || Reason(200).Valid() {
		t.Error("out-of-range reason looks valid")
	}
}

func TestReasonRoutesPanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Routes on an invalid reason did not panic")
		}
	}()
	Reason(0).Routes()
}

// TestDecideDoesNotAllocate pins zero allocations on every path, the
// ignore paths in particular.
func TestDecideDoesNotAllocate(t *testing.T) {
	for _, tc := range decideCases() {
		allocs := testing.AllocsPerRun(100, func() {
			_ = Decide(tc.ev, tc.w, tc.now)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Decide", tc.name, allocs)
		}
	}
}

func FuzzDecide(f *testing.F) {
	f.Add("C1", "", "U1", false, "", "public", false, false, uint8(0), int64(0), "U1", int64(300), int64(10))
	f.Add("C1", "root", "U2", false, "", "public", false, false, uint8(0), int64(1200), "", int64(0), int64(1199))
	f.Add("C1", "root", "U2", false, "", "private", false, true, uint8(2), int64(1200), "U2", int64(360), int64(0))
	f.Add("D1", "", "U2", true, "edit", "dm", true, false, uint8(1), int64(-5), "U2", int64(-1), int64(-9))
	f.Add("C1", "", "", false, "", "", false, false, uint8(3), int64(5), "", int64(5), int64(5))
	f.Fuzz(func(t *testing.T, channel, thread, authorID string, isBot bool, sub, vis string,
		mentionsBot, replyToBot bool, nMentions uint8, threadUntilS int64, topPerson string, topUntilS, nowS int64) {
		e := core.Event{
			Scope:       core.Scope{Platform: "fuzz", Workspace: "w", Channel: channel, Thread: thread},
			Visibility:  core.Visibility(vis),
			MessageID:   "m",
			Author:      core.Person{ID: authorID, IsBot: isBot},
			Subtype:     sub,
			MentionsBot: mentionsBot,
			ReplyToBot:  replyToBot,
			At:          t0,
		}
		kinds := []core.MentionKind{core.MentionUser, core.MentionGroup, core.MentionBroadcast}
		for i := range int(nMentions % 8) {
			e.Mentions = append(e.Mentions, core.Mention{Kind: kinds[i%3], ID: "X"})
		}
		w := Windows{
			ThreadUntil: t0.Add(time.Duration(threadUntilS%1e6) * time.Second),
			Toplevel:    Toplevel{Person: topPerson, Until: t0.Add(time.Duration(topUntilS%1e6) * time.Second)},
		}
		now := t0.Add(time.Duration(nowS%1e6) * time.Second)

		d1 := Decide(e, w, now)
		d2 := Decide(e, w, now)
		if d1 != d2 {
			t.Fatalf("not deterministic: %v then %v", d1, d2)
		}
		if !d1.Reason.Valid() || d1.Route != d1.Reason.Routes() {
			t.Fatalf("inconsistent decision %+v", d1)
		}
		if (isBot || sub != "" || authorID == "") && d1.Reason != ReasonNotAPersonMessage {
			t.Fatalf("bot/subtype/anonymous message decided %v", d1)
		}
		switch d1.Reason {
		case ReasonThreadWindow, ReasonToplevelWindow, ReasonNoWindow:
			if e.Visibility != core.Public || len(e.Mentions) > 0 || mentionsBot || replyToBot {
				t.Fatalf("window rule reached for %+v: %v", e, d1)
			}
		case ReasonPrivateNoWindow:
			if e.Visibility == core.Public || e.Visibility == core.DM {
				t.Fatalf("private-no-window for visibility %q", e.Visibility)
			}
		}
		if d1.Reason == ReasonThreadWindow && (thread == "" || !now.Before(w.ThreadUntil)) {
			t.Fatalf("thread window routed outside an open thread window: %v", d1)
		}
		if d1.Reason == ReasonToplevelWindow && (thread != "" || topPerson != authorID || !now.Before(w.Toplevel.Until)) {
			t.Fatalf("top-level window routed outside the holder's open window: %v", d1)
		}
		if !NeedsWindows(e) && Decide(e, Windows{}, now) != d1 {
			t.Fatal("NeedsWindows false but the windows mattered")
		}
	})
}

func BenchmarkDecide(b *testing.B) {
	cases := []struct {
		name string
		ev   core.Event
		w    Windows
	}{
		{"ignore/no-window", ev(author("U2")), topOpenU1},
		{"ignore/not-a-person", ev(byBot), noWindows},
		{"ignore/addressed-to-others", ev(inThread, mentions(user, here)), threadOpen},
		{"route/thread-window", ev(inThread), threadOpen},
		{"route/toplevel-window", ev(), topOpenU1},
		{"route/mention", ev(mentionsBot), noWindows},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var d Decision
			for b.Loop() {
				d = Decide(c.ev, c.w, t0)
			}
			_ = d
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
