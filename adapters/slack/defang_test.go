package slack

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// hostile pages everyone it can: each broadcast form, with and without a
// label, and a user group.
const hostile = "ping <!channel> and <!here|@here> and <!everyone> and <!subteam^S0123ABC|@eng> now, @channel (@here) @everyone!"

// rawBroadcast is a broadcast token, or a bare broadcast word, Slack
// would act on.
var rawBroadcast = regexp.MustCompile(`<!(here|channel|everyone|subteam\^)|(^|[^\p{L}\p{N}_@])@(here|channel|everyone)\b`)

// ATTACK: the same hostile text (an answer, or text quoted from an
// injected message) goes through every outbound path of the adapter: a
// post, a card, an edit, an ephemeral, a stream's start, appends (the
// token split across two of them), stop, the stopped stream's settled
// text, a file's title and name, the home tab. Not one Web API request
// carries a broadcast token Slack would act on, and no streamed message
// joins one from pieces. On the old code the stream paths (plan, task,
// chat.appendStream text, chat.stopStream) and the file title went out raw.
func TestEveryOutboundPathIsDefanged(t *testing.T) {
	f := agentFake(t, AgentScope)
	ctx := context.Background()
	a, _ := newAdapter(t, testConfig(f, ModeSocket), WithStreamChunk(16))
	root := f.AddMessage(chPublic, "", alice, "question")
	scope := core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}
	if !a.Streams(ctx, scope) {
		t.Fatal("the agent surface is off")
	}
	card := &core.Card{ID: "c1", Title: hostile, Body: hostile, Resolution: "",
		Fields:  []core.CardField{{Label: hostile, Value: hostile}},
		Actions: []core.CardAction{{ID: "approve", Label: hostile, Token: "tok"}}}
	plan := core.StreamUpdate{Title: hostile, Tasks: []core.StreamTask{{ID: "t1", Title: hostile, Status: core.TaskInProgress, Output: hostile}}, Recipient: alice}
	cut := strings.Index(hostile, "<!channel>") + len("<!chan")
	var posted core.MessageRef

	for _, tc := range []struct {
		name string
		do   func(t *testing.T) error
	}{
		{"post", func(t *testing.T) error {
			var err error
			posted, err = a.Post(ctx, core.Outbound{Key: "k-post", Scope: scope, Text: hostile})
			return err
		}},
		{"card", func(t *testing.T) error {
			_, err := a.Post(ctx, core.Outbound{Key: "k-card", Scope: scope, Text: hostile, Card: card})
			return err
		}},
		{"update text", func(t *testing.T) error {
			return a.Update(ctx, posted, core.Outbound{Scope: scope, Text: "edited " + hostile})
		}},
		{"update card", func(t *testing.T) error {
			c := *card
			c.Actions, c.Resolution = nil, hostile
			return a.Update(ctx, posted, core.Outbound{Scope: scope, Text: hostile, Card: &c})
		}},
		{"ephemeral", func(t *testing.T) error { return a.PostEphemeral(ctx, scope, alice, hostile) }},
		{"stream start, appends split in a token, stop", func(t *testing.T) error {
			ref, err := a.StartStream(ctx, core.Outbound{Key: "k-stream", Scope: scope}, plan)
			if err != nil {
				return err
			}
			for _, n := range []int{cut, cut + 2, len(hostile)} {
				u := plan
				u.Text = hostile[:n]
				if err := a.AppendStream(ctx, ref, u); err != nil {
					return err
				}
			}
			u := plan
			u.Key, u.Text = "k-stream-answer", hostile
			if err := a.StopStream(ctx, ref, u); err != nil {
				return err
			}
			// The half token was held back, not sent: the stream reads as
			// the whole answer, defanged, rather than stopping at "<!chan".
			for _, s := range f.Streams() {
				if s.TS == ref.ID && s.Text != defang(hostile) {
					t.Errorf("the stream holds %q, want the defanged answer", s.Text)
				}
			}
			return nil
		}},
		{"stream settled to another answer", func(t *testing.T) error {
			ref, err := a.StartStream(ctx, core.Outbound{Key: "k-stream2", Scope: scope}, plan)
			if err != nil {
				return err
			}
			u := plan
			u.Text = "a draft that was not the answer"
			if err := a.AppendStream(ctx, ref, u); err != nil {
				return err
			}
			u.Key, u.Text = "k-stream2-answer", "final: "+hostile
			return a.StopStream(ctx, ref, u)
		}},
		{"file title and name", func(t *testing.T) error {
			return a.UploadFile(ctx, scope, core.File{Name: "x <!channel>.txt", Title: hostile, Type: "text/plain", Content: []byte("data")})
		}},
		{"home tab", func(t *testing.T) error {
			return a.PublishHome(ctx, alice, []core.InboxItem{{ID: "i1", Kind: "approval", Where: scope, Title: hostile, Summary: hostile,
				RequestedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.Calls())
			if err := tc.do(t); err != nil {
				t.Fatal(err)
			}
			calls := f.Calls()[before:]
			if len(calls) == 0 {
				t.Fatal("no Web API call was made")
			}
			shown := false
			for _, c := range calls {
				for _, s := range c.Texts {
					if rawBroadcast.MatchString(s) {
						t.Errorf("%s carried a live broadcast token: %q", c.Method, s)
					}
					shown = shown || strings.Contains(s, "@\u2060channel")
				}
			}
			if !shown {
				t.Error("the hostile text never reached Slack (defanged): the path was not exercised")
			}
		})
	}
	for _, s := range f.Streams() {
		for _, text := range []string{s.Text, s.Plan} {
			if rawBroadcast.MatchString(text) {
				t.Errorf("stream %s holds a live broadcast token: %q", s.TS, text)
			}
		}
	}
}

// A streaming answer holds back only what may still become a token.
func TestWithoutOpenToken(t *testing.T) {
	long := "x <!" + strings.Repeat("a", 300)
	for _, c := range []struct{ in, want string }{
		{"a < b, so a is smaller", "a < b, so a is smaller"},
		{"ping <", "ping "},
		{"ping <!chan", "ping "},
		{"ping <!subteam^S01|@en", "ping "},
		{"ping <!here> now", "ping <!here> now"},
		{"see <https://example.com", "see <https://example.com"},
		{long, long},
	} {
		if got := withoutOpenToken(c.in); got != c.want {
			t.Errorf("withoutOpenToken(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Bare broadcast words are defanged too (Slack parses them in mrkdwn text
// objects); addresses and longer words are left alone.
func TestDefangBareBroadcastWords(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"@here look", "@\u2060here look"},
		{"hey @channel!", "hey @\u2060channel!"},
		{"(@everyone)", "(@\u2060everyone)"},
		{"mail ops@here.com", "mail ops@here.com"},
		{"the @channels list", "the @channels list"},
		{"<!here>", "@\u2060here"},
		// mrkdwn around the word: italics, bold, strike.
		{"_@here_", "_@\u2060here_"},
		{"*@channel*", "*@\u2060channel*"},
		{"~@everyone~", "~@\u2060everyone~"},
	} {
		if got := defang(c.in); got != c.want {
			t.Errorf("defang(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
