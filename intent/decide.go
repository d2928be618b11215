package intent

import (
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Reason is why a message was routed or ignored. It is a closed set: the
// values are the constants below, Reasons lists them all, and
// TestEveryReasonIsProduced fails when one can no longer be produced.
type Reason uint8

const (
	reasonInvalid Reason = iota
	// ReasonDM: a direct message to the bot (rule 2).
	ReasonDM
	// ReasonMention: the message mentions the bot by id (rule 3).
	ReasonMention
	// ReasonReplyToBot: an explicit reply to one of the bot's messages (rule 3).
	ReasonReplyToBot
	// ReasonThreadWindow: in a thread whose window is open (rule 6).
	ReasonThreadWindow
	// ReasonToplevelWindow: at top level, from the person whose top-level
	// window is open (rule 7).
	ReasonToplevelWindow
	// ReasonNotAPersonMessage: a bot's message, or an edit, deletion, join
	// or other subtype (rule 1).
	ReasonNotAPersonMessage
	// ReasonAddressedToOthers: mentions someone else, a group or a
	// broadcast, and not the bot (rule 4).
	ReasonAddressedToOthers
	// ReasonPrivateNoWindow: in a private channel, only DMs, mentions and
	// replies to the bot route (rule 5).
	ReasonPrivateNoWindow
	// ReasonNoWindow: nothing addressed the bot (rule 8).
	ReasonNoWindow
	reasonEnd
)

// NumReasons is the number of valid reasons.
const NumReasons = int(reasonEnd) - 1

var reasonNames = [reasonEnd]string{
	reasonInvalid:           "",
	ReasonDM:                "dm",
	ReasonMention:           "mention",
	ReasonReplyToBot:        "reply-to-bot",
	ReasonThreadWindow:      "thread-window",
	ReasonToplevelWindow:    "toplevel-window",
	ReasonNotAPersonMessage: "not-a-person-message",
	ReasonAddressedToOthers: "addressed-to-others",
	ReasonPrivateNoWindow:   "private-no-window",
	ReasonNoWindow:          "no-window",
}

// Reasons returns every valid reason in declaration order.
func Reasons() []Reason {
	out := make([]Reason, 0, NumReasons)
	for r := reasonInvalid + 1; r < reasonEnd; r++ {
		out = append(out, r)
	}
	return out
}

// Valid reports whether r is one of the declared reasons.
func (r Reason) Valid() bool { return r > reasonInvalid && r < reasonEnd }

// Routes reports whether a decision with this reason routes the message.
// It panics on an invalid reason: a new reason must be placed here.
func (r Reason) Routes() bool {
	switch r {
	case ReasonDM, ReasonMention, ReasonReplyToBot, ReasonThreadWindow, ReasonToplevelWindow:
		return true
	case ReasonNotAPersonMessage, ReasonAddressedToOthers, ReasonPrivateNoWindow, ReasonNoWindow:
		return false
	}
	panic(fmt.Sprintf("intent: unhandled reason %d", uint8(r)))
}

func (r Reason) String() string {
	if r >= reasonEnd {
		return fmt.Sprintf("reason(%d)", uint8(r))
	}
	return reasonNames[r]
}

// ParseReason maps the text form back to a Reason.
func ParseReason(s string) (Reason, error) {
	for r := reasonInvalid + 1; r < reasonEnd; r++ {
		if reasonNames[r] == s {
			return r, nil
		}
	}
	return reasonInvalid, fmt.Errorf("unknown intent reason %q", s)
}

// MarshalText encodes the reason as its name ("thread-window").
func (r Reason) MarshalText() ([]byte, error) {
	if !r.Valid() {
		return nil, fmt.Errorf("marshal invalid intent reason %d", uint8(r))
	}
	return []byte(reasonNames[r]), nil
}

// UnmarshalText parses a reason name.
func (r *Reason) UnmarshalText(b []byte) error {
	p, err := ParseReason(string(b))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// Decision is the filter's verdict on one message.
type Decision struct {
	Route  bool
	Reason Reason
}

func (d Decision) String() string {
	if d.Route {
		return "route(" + d.Reason.String() + ")"
	}
	return "ignore(" + d.Reason.String() + ")"
}

func decide(r Reason) Decision { return Decision{Route: r.Routes(), Reason: r} }

// Toplevel is a channel's top-level window: the person the bot most recently
// answered at top level, when (At), and until when the window is open.
type Toplevel struct {
	Person string
	At     time.Time // when the bot answered; the most recent answer wins
	Until  time.Time
}

// Open reports whether the window is open at now for person.
func (t Toplevel) Open(person string, now time.Time) bool {
	return person != "" && t.Person == person && now.Before(t.Until)
}

// Windows is what the caller fetched from the WindowStore for one event: the
// window of the event's thread (zero at top level or when none is open) and
// the channel's top-level window.
type Windows struct {
	ThreadUntil time.Time
	Toplevel    Toplevel
}

// ThreadOpen reports whether the thread window is open at now.
func (w Windows) ThreadOpen(now time.Time) bool { return now.Before(w.ThreadUntil) }

// Decide applies the rules of ARCHITECTURE.md section 5, in order, to one
// event. It is pure and does not allocate: w is the windows the caller
// fetched for ev (see WindowStore.Windows), now the current time.
func Decide(ev core.Event, w Windows, now time.Time) Decision {
	if d, ok := decideStatic(&ev); ok {
		return d
	}
	return decideWindows(&ev, w, now)
}

// decideStatic applies rules 1 to 5, which need no window. ok is false when
// the decision depends on windows (rules 6 to 8).
func decideStatic(ev *core.Event) (Decision, bool) {
	// 1. Bots (ours included), subtypes (edits, deletions, joins, ...), and
	//    anything without a verified author are not a person's message.
	if ev.Author.IsBot || ev.Subtype != "" || ev.Author.ID == "" {
		return decide(ReasonNotAPersonMessage), true
	}
	// 2. A DM to the bot.
	if ev.Visibility == core.DM {
		return decide(ReasonDM), true
	}
	// 3. Mentions the bot (resolved by id), or replies to one of its messages.
	if ev.MentionsBot {
		return decide(ReasonMention), true
	}
	if ev.ReplyToBot {
		return decide(ReasonReplyToBot), true
	}
	// 4. Addressed to another user, a group or a broadcast, not the bot.
	//    Mentions has no bot entry that counts here: rule 3 came first.
	if len(ev.Mentions) > 0 {
		return decide(ReasonAddressedToOthers), true
	}
	// 5. Private channels (and unknown visibility: fail closed).
	if ev.Visibility != core.Public {
		return decide(ReasonPrivateNoWindow), true
	}
	return Decision{}, false
}

// decideWindows applies rules 6 to 8.
func decideWindows(ev *core.Event, w Windows, now time.Time) Decision {
	if ev.Scope.Thread != "" {
		// 6. In a thread whose window is open, whoever the author is.
		if w.ThreadOpen(now) {
			return decide(ReasonThreadWindow)
		}
	} else if w.Toplevel.Open(ev.Author.ID, now) {
		// 7. At top level, from the person the bot last answered there.
		return decide(ReasonToplevelWindow)
	}
	// 8. Nothing else routes.
	return decide(ReasonNoWindow)
}

// NeedsWindows reports whether Decide's outcome for ev depends on windows.
// When it is false, Decide(ev, Windows{}, now) is final and the caller need
// not read the window store.
func NeedsWindows(ev core.Event) bool {
	_, ok := decideStatic(&ev)
	return !ok
}
