package telegram

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// Telegram has one message only one person sees: the answer to their own
// button press (answerCallbackQuery with show_alert). PostEphemeral uses it
// while the press is still unanswered; afterwards it falls back to a
// private message (which works once the person has started the bot).

var _ core.Ephemeral = (*Adapter)(nil)

// defaultEphemeralGrace is how long a recorded press waits for a refusal
// before its plain answer goes out.
const defaultEphemeralGrace = 750 * time.Millisecond

// maxAlertText is answerCallbackQuery's text limit (characters).
const maxAlertText = 200

// pendingPress is a button press not answered yet.
type pendingPress struct {
	key     string
	queryID string
	text    chan string // PostEphemeral's text, buffered 1
	taken   bool        // by PostEphemeral or the answerer; guarded by pressBook.mu
}

type pressBook struct {
	mu sync.Mutex
	m  map[string]*pendingPress
}

// awaitEphemeral registers a press by userID in channel, so PostEphemeral
// can answer it. A later press by the same person replaces it.
func (a *Adapter) awaitEphemeral(channel, userID, queryID string) *pendingPress {
	p := &pendingPress{key: channel + "|" + userID, queryID: queryID, text: make(chan string, 1)}
	a.presses.mu.Lock()
	if a.presses.m == nil {
		a.presses.m = map[string]*pendingPress{}
	}
	a.presses.m[p.key] = p
	a.presses.mu.Unlock()
	return p
}

// dropEphemeral unregisters p and claims it for a plain answer; false
// means PostEphemeral took it first and its text is on p.text.
func (a *Adapter) dropEphemeral(p *pendingPress) bool {
	a.presses.mu.Lock()
	defer a.presses.mu.Unlock()
	if a.presses.m[p.key] == p {
		delete(a.presses.m, p.key)
	}
	if p.taken {
		return false
	}
	p.taken = true
	return true
}

// answerAfterGrace answers a recorded press: with the refusal as an alert
// if PostEphemeral brings one in time, else plainly after the grace (or at
// the answer deadline, whichever is first).
func (a *Adapter) answerAfterGrace(ctx context.Context, p *pendingPress, deadline time.Time) {
	grace := time.NewTimer(min(a.ephemeralGrace, max(time.Until(deadline), 0)))
	defer grace.Stop()
	var text string
	select {
	case text = <-p.text:
	case <-grace.C:
	}
	if text == "" && !a.dropEphemeral(p) {
		text = <-p.text // taken just now: the text is on its way
	}
	pr := params("callback_query_id", p.queryID)
	if text != "" {
		pr["text"] = truncateRunes(text, maxAlertText)
		pr["show_alert"] = "true"
	}
	a.sendAnswer(ctx, pr)
}

// PostEphemeral implements core.Ephemeral: the text is the alert answering
// userID's pending button press in scope; without one, a private message.
func (a *Adapter) PostEphemeral(ctx context.Context, scope core.Scope, userID, text string) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	if userID == "" || text == "" {
		return errors.New("telegram: ephemeral message needs a user and a text")
	}
	a.presses.mu.Lock()
	p := a.presses.m[scope.Channel+"|"+userID]
	if p != nil {
		delete(a.presses.m, p.key)
		if p.taken {
			p = nil
		} else {
			p.taken = true
		}
	}
	a.presses.mu.Unlock()
	if p != nil && utf8.RuneCountInString(text) <= maxAlertText {
		p.text <- text
		return nil
	}
	if p != nil {
		p.text <- "" // too long for an alert: answered plainly, sent below
	}
	a.log.Debug("telegram: no press waiting for its answer; the message for one person goes privately", "user", userID)
	id, err := strconv.ParseInt(userID, 10, 64)
	if err != nil || id <= 0 {
		return errors.New("telegram: ephemeral message: not a user id")
	}
	_, err = a.Post(ctx, core.Outbound{Scope: core.Scope{Platform: Platform, Channel: userID}, Text: text, Priority: core.PriorityHigh})
	return err
}
