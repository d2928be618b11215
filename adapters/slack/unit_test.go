package slack

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

const botID = "U0BOTB0T01"

func TestParseMentions(t *testing.T) {
	got := parseMentions("hi <@" + botID + "> and <@U0ALICE001|alice>, <!subteam^S0TEAM0001|@oncall> <!here> <!channel> <!everyone> <@" + botID + "> <#C0CHAN0001|general> <https://x.y|link> <!date^1392734382^{date}|Feb> <@lower>")
	want := []core.Mention{
		{Kind: core.MentionUser, ID: botID},
		{Kind: core.MentionUser, ID: "U0ALICE001"},
		{Kind: core.MentionGroup, ID: "S0TEAM0001"},
		{Kind: core.MentionBroadcast, ID: "here"},
		{Kind: core.MentionBroadcast, ID: "channel"},
		{Kind: core.MentionBroadcast, ID: "everyone"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mentions = %+v\nwant %+v", got, want)
	}
	if m := parseMentions("no mentions, just <b>html-ish</b> and an unclosed <@U0X"); len(m) != 0 {
		t.Fatalf("got %+v", m)
	}
}

func TestStripLeadingMention(t *testing.T) {
	cases := map[string]string{
		"<@" + botID + "> remember x":       "remember x",
		"  <@" + botID + ">: remember x":    "remember x",
		"<@" + botID + "|bot>, remember x":  "remember x",
		"<@" + botID + ">\nremember x":      "remember x",
		"<@" + botID + ">":                  "",
		"remember x <@" + botID + ">":       "remember x <@" + botID + ">",
		"<@U0ALICE001> <@" + botID + "> hi": "<@U0ALICE001> <@" + botID + "> hi",
		"<@" + botID + "X> not us":          "<@" + botID + "X> not us",
		"plain":                             "plain",
	}
	for in, want := range cases {
		if got := stripLeadingMention(in, botID); got != want {
			t.Errorf("strip(%q) = %q, want %q", in, got, want)
		}
	}
	if got := stripLeadingMention("<@"+botID+"> x", ""); got != "<@"+botID+"> x" {
		t.Errorf("unknown identity stripped: %q", got)
	}
}

func TestNormaliseMessage(t *testing.T) {
	self := identity{userID: botID, teamID: "T1", botID: "B1"}
	ev := normalise(message{
		team: "T1", channel: "C1", channelType: "channel", ts: "1700000000.000200", threadTS: "1700000000.000100",
		user: "U0ALICE001", text: "<@" + botID + "> ping <!here>",
	}, core.Public, self)
	want := core.Event{
		Scope:      core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1700000000.000100"},
		Visibility: core.Public, MessageID: "1700000000.000200",
		Author: core.Person{ID: "U0ALICE001"}, Text: "ping <!here>",
		Mentions:    []core.Mention{{Kind: core.MentionUser, ID: botID}, {Kind: core.MentionBroadcast, ID: "here"}},
		MentionsBot: true,
		At:          time.Unix(1700000000, 200000).UTC(),
	}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("event = %+v\nwant    %+v", ev, want)
	}
	// A thread root (thread_ts == ts) is top level; an edited app_mention is an edit.
	root := normalise(message{team: "T1", channel: "C1", ts: "5.1", threadTS: "5.1", user: "U2", edited: true, text: "x"}, core.Public, self)
	if root.Scope.Thread != "" || root.Subtype != "message_changed" {
		t.Fatalf("root = %+v", root)
	}
	// Our own message is a bot's even without bot_id.
	if own := normalise(message{channel: "C1", ts: "1.1", user: botID}, core.Public, self); !own.Author.IsBot {
		t.Fatal("own message not flagged as bot")
	}
}

func TestVisibilityMapping(t *testing.T) {
	for ct, want := range map[string]core.Visibility{"channel": core.Public, "group": core.Private, "mpim": core.Private, "im": core.DM} {
		if got, ok := visibilityOfType(ct); !ok || got != want {
			t.Errorf("%s → %q", ct, got)
		}
	}
	if _, ok := visibilityOfType(""); ok {
		t.Error("empty channel_type resolved")
	}
	if visibilityFallback("D123") != core.DM || visibilityFallback("G123") != core.Private || visibilityFallback("C123") != core.Private {
		t.Error("fallbacks")
	}
}

func TestParseTS(t *testing.T) {
	if got := parseTS("1355517523.000005"); !got.Equal(time.Unix(1355517523, 5000)) {
		t.Fatalf("got %v", got)
	}
	if !parseTS("garbage").IsZero() || !parseTS("").IsZero() {
		t.Fatal("garbage parsed")
	}
}

func TestRenderCardShapeAndLimits(t *testing.T) {
	card := &core.Card{
		ID: "card-1", Title: strings.Repeat("T", 200), Body: "Body with <!channel> in it",
		Fields: []core.CardField{{Label: "Who", Value: "alice"}},
		Actions: []core.CardAction{
			{ID: "approve", Label: strings.Repeat("L", 100), Token: strings.Repeat("t", 2000), Style: "primary"},
			{ID: "decline", Label: "Decline", Token: "d", Style: "danger"},
		},
	}
	blocks, fallback, err := renderCard(card, "")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(blocks)
	var got []map[string]any
	_ = json.Unmarshal(raw, &got)
	types := []string{}
	for _, b := range got {
		types = append(types, b["type"].(string))
	}
	if strings.Join(types, ",") != "header,section,section,actions" {
		t.Fatalf("block types = %v\n%s", types, raw)
	}
	header := got[0]["text"].(map[string]any)
	if header["type"] != "plain_text" || utf8.RuneCountInString(header["text"].(string)) != maxHeaderText {
		t.Fatalf("header = %v", header)
	}
	if strings.Contains(string(raw), "<!channel>") {
		t.Fatal("broadcast token not defanged")
	}
	acts := got[3]
	if acts["block_id"] != "card-1" {
		t.Fatalf("block_id = %v", acts["block_id"])
	}
	els := acts["elements"].([]any)
	b0 := els[0].(map[string]any)
	if b0["type"] != "button" || b0["action_id"] != "approve" || b0["value"] != strings.Repeat("t", 2000) || b0["style"] != "primary" {
		t.Fatalf("button = %v", b0)
	}
	if n := utf8.RuneCountInString(b0["text"].(map[string]any)["text"].(string)); n > maxButtonText {
		t.Fatalf("button text %d chars", n)
	}
	if els[1].(map[string]any)["style"] != "danger" {
		t.Fatal("danger style")
	}
	if fallback == "" || utf8.RuneCountInString(fallback) > maxFallbackText {
		t.Fatalf("fallback %q", fallback)
	}

	// Resolved: no buttons, resolution shown.
	card.Resolution = "Approved by alice"
	blocks, _, err = renderCard(card, "")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(blocks)
	if strings.Contains(string(raw), `"actions"`) || strings.Contains(string(raw), `"button"`) || !strings.Contains(string(raw), "Approved by alice") {
		t.Fatalf("resolved = %s", raw)
	}

	// Limits that cannot be truncated are errors.
	bad := []*core.Card{
		{ID: "c", Title: "t", Actions: []core.CardAction{{ID: strings.Repeat("a", 256), Label: "x", Token: "t"}}},
		{ID: "c", Title: "t", Actions: []core.CardAction{{ID: "a", Label: "x", Token: strings.Repeat("t", 2001)}}},
		{ID: strings.Repeat("c", 256), Title: "t"},
		{ID: "c", Title: "t", Actions: []core.CardAction{{ID: "a", Token: "1"}, {ID: "a", Token: "2"}}},
	}
	for i, c := range bad {
		if _, _, err := renderCard(c, ""); err == nil {
			t.Errorf("bad card %d rendered", i)
		}
	}
}

func TestDefang(t *testing.T) {
	in := "hey <!here> and <!channel|@channel> and <!subteam^S0ABC|@ops> but <@U0ALICE001> stays"
	out := defang(in)
	if strings.Contains(out, "<!") || !strings.Contains(out, "<@U0ALICE001>") || len(parseMentions(out)) != 1 {
		t.Fatalf("defang = %q", out)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1",
		"MARLOWE_SLACK_API_URL": "http://127.0.0.1:9999/api",
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.Mode != ModeSocket || cfg.Validate() != nil {
		t.Fatalf("cfg = %+v, %v, %v", cfg, err, cfg.Validate())
	}
	if cfg.withDefaults().APIURL != "http://127.0.0.1:9999/api/" {
		t.Fatalf("api url = %q, want the trailing slash added", cfg.withDefaults().APIURL)
	}
	if cfg.withDefaults().AckTimeout >= 3*time.Second || cfg.withDefaults().DedupeTTL < 10*time.Minute {
		t.Fatal("defaults out of Slack's bounds")
	}

	if _, err := ConfigFromEnv(func(k string) string { return map[string]string{"MARLOWE_SLACK_MODE": "rtm"}[k] }); err == nil {
		t.Fatal("bad mode accepted")
	}
	checks := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "SLACK_BOT_TOKEN is not set"},
		{map[string]string{"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_APP_TOKEN is not set"},
		{map[string]string{"SLACK_BOT_TOKEN": "xapp-1", "SLACK_APP_TOKEN": "xapp-1"}, "does not look like a bot token"},
		{map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-1"}, "does not look like an app-level token"},
		{map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "MARLOWE_SLACK_MODE": "http"}, "SLACK_SIGNING_SECRET is not set"},
		{map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "MARLOWE_SLACK_API_URL": "slack.com/api"}, "MARLOWE_SLACK_API_URL"},
	}
	for _, c := range checks {
		cfg, err := ConfigFromEnv(func(k string) string { return c.env[k] })
		if err == nil {
			_, err = New(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v: err = %v, want %q", c.env, err, c.want)
		}
	}
	if _, err := New(Config{BotToken: "xoxb-1", Mode: ModeHTTP, SigningSecret: "s"}); err != nil {
		t.Fatalf("http mode without app token: %v", err)
	}
}
