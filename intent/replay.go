package intent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Scenario files (../shared/scenarios/README.md) are JSONL: one line per
// message a person or bot wrote ("message") or per post of our bot
// ("bot_post"), in time order. ReplayScenario runs them through the real
// Decide, Observe and MemoryStore, on a clock that reads the lines' t.

// ScenarioEpoch returns the time t = 0 of a replayed scenario.
func ScenarioEpoch() time.Time { return time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC) }

const (
	scenarioBot        = "BOT" // our bot's id in scenario files
	scenarioPlatform   = "scenario"
	scenarioWorkspace  = "replay"
	maxScenarioLine    = 1 << 20
	maxScenarioSeconds = 1e9 // about 31 years: keeps t * time.Second in range
	groupPrefix        = "@group:"
	lineMessage        = "message"
	lineBotPost        = "bot_post"
)

// scenarioLine is one decoded line. Pointers tell a missing field from an
// empty one; unknown fields are ignored.
type scenarioLine struct {
	T          *float64 `json:"t"`
	Type       *string  `json:"type"`
	ID         *string  `json:"id"`
	Channel    *string  `json:"channel"`
	Visibility *string  `json:"visibility"`
	Thread     string   `json:"thread"`
	User       *string  `json:"user"`
	Bot        bool     `json:"bot"`
	Subtype    string   `json:"subtype"`
	Mentions   []string `json:"mentions"`
	ReplyTo    string   `json:"reply_to"`
	Answering  string   `json:"answering"`
	Text       string   `json:"text"`
	Expect     string   `json:"expect"`
	Reason     string   `json:"reason"`
}

// scenarioStep is one validated line.
type scenarioStep struct {
	line    int
	at      time.Time
	botPost bool
	id      string
	channel string
	expect  string // informative, for tests
	reason  string // informative, for tests

	// message
	event core.Event

	// bot_post
	post Post
}

// ScenarioResult is what ReplayScenario prints for one message line.
type ScenarioResult struct {
	ID       string `json:"id"`
	Decision string `json:"decision"` // route | ignore
	Reason   Reason `json:"reason"`
}

// ReplayScenario reads a scenario (JSONL, see ../shared/scenarios/README.md)
// from r and writes to w, for every message line in input order, one JSON
// line {"id":…,"decision":"route"|"ignore","reason":…}. Window lengths are
// the defaults. The whole input is validated before anything is written; a
// malformed line is an error naming its line number.
func ReplayScenario(r io.Reader, w io.Writer) error {
	return ReplayScenarioPolicy(r, w, nil)
}

// ReplayScenarioPolicy is ReplayScenario with per-channel policies (window
// lengths), looked up by the scenario's channel id; nil means defaults.
func ReplayScenarioPolicy(r io.Reader, w io.Writer, policy func(channel string) core.Policy) error {
	steps, err := parseScenario(r)
	if err != nil {
		return err
	}
	results, err := runScenario(steps, policy)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, res := range results {
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("replay: write result for %s: %w", res.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("replay: write results: %w", err)
	}
	return nil
}

// runScenario replays validated steps and returns one result per message.
func runScenario(steps []scenarioStep, policy func(channel string) core.Policy) ([]ScenarioResult, error) {
	ctx := context.Background()
	var now time.Time
	clock := func() time.Time { return now }
	f := NewFilter(NewMemoryStore(clock), clock)
	results := make([]ScenarioResult, 0, len(steps))
	for _, s := range steps {
		now = s.at
		if s.botPost {
			var pol core.Policy
			if policy != nil {
				pol = policy(s.channel)
			}
			if err := f.Posted(ctx, s.post, pol); err != nil {
				return nil, fmt.Errorf("line %d: %w", s.line, err)
			}
			continue
		}
		d, err := f.Decide(ctx, s.event)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", s.line, err)
		}
		res := ScenarioResult{ID: s.id, Decision: "ignore", Reason: d.Reason}
		if d.Route {
			res.Decision = "route"
		}
		results = append(results, res)
	}
	return results, nil
}

// parseScenario reads and validates every line.
func parseScenario(r io.Reader) ([]scenarioStep, error) {
	type entry struct {
		n    int
		line scenarioLine
	}
	var entries []entry
	index := map[string]int{} // id -> position in entries
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxScenarioLine)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l scenarioLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if err := checkLine(&l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if prev, dup := index[*l.ID]; dup {
			return nil, fmt.Errorf("line %d: id %q already used on line %d", n, *l.ID, entries[prev].n)
		}
		if len(entries) > 0 && *l.T < *entries[len(entries)-1].line.T {
			return nil, fmt.Errorf("line %d: t %g goes back in time (previous line has %g)", n, *l.T, *entries[len(entries)-1].line.T)
		}
		index[*l.ID] = len(entries)
		entries = append(entries, entry{n: n, line: l})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes", n+1, maxScenarioLine)
		}
		return nil, fmt.Errorf("line %d: read: %w", n+1, err)
	}

	// target resolves a reference (reply_to, answering) to an earlier line.
	target := func(i int, field, id string) (*scenarioLine, error) {
		j, ok := index[id]
		if !ok {
			return nil, nil // a message from before the scenario started
		}
		if j >= i {
			return nil, fmt.Errorf("%s %q refers to a line that is not earlier (line %d)", field, id, entries[j].n)
		}
		return &entries[j].line, nil
	}

	steps := make([]scenarioStep, 0, len(entries))
	for i, e := range entries {
		l := &e.line
		s := scenarioStep{
			line:    e.n,
			at:      ScenarioEpoch().Add(time.Duration(math.Round(*l.T * float64(time.Second)))),
			botPost: *l.Type == lineBotPost,
			id:      *l.ID,
			channel: *l.Channel,
			expect:  l.Expect,
			reason:  l.Reason,
		}
		scope := core.Scope{Platform: scenarioPlatform, Workspace: scenarioWorkspace, Channel: *l.Channel, Thread: l.Thread}
		if scope.Thread == *l.ID {
			scope.Thread = "" // a thread root is a top-level message
		}
		if s.botPost {
			s.post = Post{Channel: scope.Key(), Thread: scope.Thread, MessageID: *l.ID, At: s.at, Answering: l.Answering}
			if l.Answering != "" {
				a, err := target(i, "answering", l.Answering)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", e.n, err)
				}
				if a != nil && *a.Type == lineMessage {
					if *a.Channel != *l.Channel {
						return nil, fmt.Errorf("line %d: answering %q, a message in channel %q, not %q", e.n, l.Answering, *a.Channel, *l.Channel)
					}
					s.post.AnsweringUser = *a.User
					s.post.AnsweringTop = a.Thread == "" || a.Thread == *a.ID
					s.post.AnsweringDM = a.Visibility != nil && *a.Visibility == string(core.DM)
				}
			}
			steps = append(steps, s)
			continue
		}
		ev := core.Event{
			Scope:      scope,
			Visibility: core.Public,
			MessageID:  *l.ID,
			Author:     core.Person{ID: *l.User, IsBot: l.Bot},
			Subtype:    l.Subtype,
			Text:       l.Text,
			ReplyTo:    l.ReplyTo,
			At:         s.at,
		}
		if l.Visibility != nil {
			ev.Visibility = core.Visibility(*l.Visibility)
		}
		for _, m := range l.Mentions {
			mention, isBot, err := parseMention(m)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", e.n, err)
			}
			if isBot {
				ev.MentionsBot = true
				continue
			}
			ev.Mentions = append(ev.Mentions, mention)
		}
		if l.ReplyTo != "" {
			a, err := target(i, "reply_to", l.ReplyTo)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", e.n, err)
			}
			ev.ReplyToBot = a != nil && (*a.Type == lineBotPost || (a.User != nil && *a.User == scenarioBot))
		}
		s.event = ev
		steps = append(steps, s)
	}
	return steps, nil
}

// checkLine validates one decoded line on its own.
func checkLine(l *scenarioLine) error {
	switch {
	case l.Type == nil || *l.Type == "":
		return errors.New("missing field type")
	case *l.Type != lineMessage && *l.Type != lineBotPost:
		return fmt.Errorf("type %q: want %q or %q", *l.Type, lineMessage, lineBotPost)
	case l.ID == nil || *l.ID == "":
		return errors.New("missing field id")
	case l.Channel == nil || *l.Channel == "":
		return errors.New("missing field channel")
	case l.T == nil:
		return errors.New("missing field t")
	case *l.T < 0 || *l.T > maxScenarioSeconds || math.IsNaN(*l.T):
		return fmt.Errorf("t %g: want seconds in [0, %g]", *l.T, float64(maxScenarioSeconds))
	}
	if *l.Type == lineBotPost {
		return nil
	}
	if l.User == nil || *l.User == "" {
		return errors.New("missing field user")
	}
	if l.Visibility != nil {
		switch core.Visibility(*l.Visibility) {
		case core.Public, core.Private, core.DM:
		default:
			return fmt.Errorf("visibility %q: want public, private or dm", *l.Visibility)
		}
	}
	return nil
}

// parseMention maps a scenario mention to a core.Mention: BOT is our bot,
// !here / !channel / !everyone are broadcasts, @group:NAME a group, anything
// else a user id.
func parseMention(m string) (core.Mention, bool, error) {
	switch {
	case m == "":
		return core.Mention{}, false, errors.New("empty mention")
	case m == scenarioBot:
		return core.Mention{}, true, nil
	case m == "!here" || m == "!channel" || m == "!everyone":
		return core.Mention{Kind: core.MentionBroadcast, ID: m[1:]}, false, nil
	case strings.HasPrefix(m, "!"):
		return core.Mention{}, false, fmt.Errorf("mention %q: unknown broadcast (want !here, !channel or !everyone)", m)
	case strings.HasPrefix(m, groupPrefix):
		name := m[len(groupPrefix):]
		if name == "" {
			return core.Mention{}, false, fmt.Errorf("mention %q: empty group name", m)
		}
		return core.Mention{Kind: core.MentionGroup, ID: name}, false, nil
	}
	return core.Mention{Kind: core.MentionUser, ID: m}, false, nil
}
