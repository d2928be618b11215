package fold

import (
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Conversations. A routed message joins one conversation (its
// message.received names it: core.MessageReceived.Conversation, decided at
// ingress from this fold), and the run it starts is given that
// conversation's recent turns. The fold keeps, all from the journal:
//
//   - each conversation's recent turns (people's routed messages and the
//     bot's answers), bounded by ConversationTurns and ConversationTokens;
//   - which conversation each thread belongs to (a thread started under a
//     top-level follow-up continues the follow-up's conversation);
//   - which conversation each routed or posted message belongs to, so a
//     reply to it continues that conversation;
//   - the exchange that opened the channel's top-level window.

// Bounds of a conversation's history: at most ConversationTurns turns and
// about ConversationTokens tokens (TurnTokens), each turn cut to
// conversationTurnChars characters, so what a follow-up costs stays flat
// however long the conversation (a DM) gets.
const (
	ConversationTurns     = 20
	ConversationTokens    = 2000
	conversationTurnChars = 1500
	// Conversations, threads and messages remembered per channel; older
	// ones are forgotten first (a reply to a message older than the last
	// conversationMessages starts a new conversation).
	historyMaxThreads    = 4096
	conversationThreads  = 4096
	conversationMessages = 16384
)

// TurnTokens estimates what one turn costs in the model's context: about
// four bytes a token, plus the line's framing (who said it).
func TurnTokens(t core.ThreadTurn) int {
	return tokensOf(len(t.Text), t.Author)
}

func tokensOf(size int, author core.Person) int {
	return (size + len(author.Name) + len(author.ID) + 24) / 4
}

// turn is one turn of a conversation as the fold keeps it: a reference to
// the command it came from (Seq) and the size of its text, never a copy
// that outlives the command. The fold folded live holds the text as well
// (Text, never encoded: a snapshot and Dump carry the reference only), so
// a redaction of the command removes the turn (forgetSeq) and nothing of
// it survives in a checkpoint. Readers resolve the text from the journal
// (TurnText), where an erased command has none.
type turn struct {
	Seq    uint64      `json:"seq"`
	Author core.Person `json:"author"`
	Bot    bool        `json:"bot,omitempty"`
	Size   int         `json:"size"`
	Text   string      `json:"-"`
}

// TurnText is the text a conversation turn shows of c (a person's routed
// message or the bot's answer), cut as the fold cuts it, and whether c
// still has one (a redacted command has none).
func TurnText(c core.Command) (string, bool) {
	if c.Redacted() && !c.Restated() {
		return "", false
	}
	switch c.Kind() {
	case core.KindMessageReceived:
		if p, err := core.Decode[*core.MessageReceived](c); err == nil {
			return cutTurn(p.Text), true
		}
	case core.KindMessagePosted:
		if p, err := core.Decode[*core.MessagePosted](c); err == nil && p.Text != "" {
			return cutTurn(p.Text), true
		}
	}
	return "", false
}

func cutTurn(s string) string {
	if len(s) > conversationTurnChars {
		return core.Truncate(s, conversationTurnChars)
	}
	return s
}

// boundTurns keeps the newest turns within the turn and token bounds, and
// unindexes the turns it drops.
func (f *Channel) boundTurns(h []turn) []turn {
	total := 0
	keep := 0
	for i := len(h) - 1; i >= 0 && keep < ConversationTurns; i-- {
		n := tokensOf(h[i].Size, h[i].Author)
		if keep > 0 && total+n > ConversationTokens {
			break
		}
		total += n
		keep++
	}
	if keep == len(h) {
		return h
	}
	for _, t := range h[:len(h)-keep] {
		delete(f.turnConv, t.Seq)
	}
	return slices.Clone(h[len(h)-keep:])
}

// forgetSeq removes what the fold copied from the command at seq, which a
// command.redacted names: its conversation turn and, when it steers a live
// run, its place among the run's steering messages. Every fold that folds
// the redaction (live, restored from a checkpoint, on any replica) drops
// them, so no later run is given the erased text.
func (f *Channel) forgetSeq(seq uint64) {
	if conv, ok := f.turnConv[seq]; ok {
		delete(f.turnConv, seq)
		f.history[conv] = slices.DeleteFunc(f.history[conv], func(t turn) bool { return t.Seq == seq })
	}
	for id := range f.live {
		if r := f.runs[id]; r != nil {
			r.Steer = slices.DeleteFunc(r.Steer, func(c core.Command) bool { return c.Seq() == seq })
		}
	}
}

// fifoMap is a string map that forgets its oldest keys beyond max.
type fifoMap struct {
	M     map[string]string
	Order []string
	max   int
}

func newFIFOMap(max int) fifoMap { return fifoMap{M: map[string]string{}, max: max} }

func (m *fifoMap) set(k, v string) {
	if _, ok := m.M[k]; !ok {
		m.Order = append(m.Order, k)
		if len(m.Order) > m.max {
			delete(m.M, m.Order[0])
			m.Order = m.Order[1:]
		}
	}
	m.M[k] = v
}

// topExchange is the exchange that opened the channel's top-level window:
// the person answered, the conversation of the answer, and when.
type topExchange struct {
	User string
	Conv string
	At   time.Time
}

// messageConversation is the conversation a message.received joins: the
// recorded key, or for messages recorded before conversations their
// thread (a DM's top level is the DM's one conversation).
func messageConversation(p *core.MessageReceived, thread string) string {
	switch {
	case p.Conversation != "":
		return p.Conversation
	case p.Visibility == core.DM && thread == "":
		return core.ConversationDM
	}
	return thread
}

// joined folds a routed message into its conversation.
func (f *Channel) joined(seq uint64, p *core.MessageReceived, thread string) string {
	conv := messageConversation(p, thread)
	f.remember(conv, seq, p.Author, false, p.Text)
	if p.MessageID != "" {
		f.msgConv.set(p.MessageID, conv)
	}
	if thread != "" && thread != conv {
		f.threadConv.set(thread, conv)
	}
	return conv
}

// answered folds one of the bot's posts into its run's conversation.
func (f *Channel) answered(c core.Command, p *core.MessagePosted) {
	conv := f.ConversationOfThread(c.Scope().Thread)
	if r := f.runs[c.Run()]; r != nil && r.Conversation != "" {
		conv = r.Conversation
	}
	if p.MessageID != "" {
		f.msgConv.set(p.MessageID, conv)
	}
	if p.Role == core.RoleAnswer && p.Text != "" {
		f.remember(conv, c.Seq(), core.Person{}, true, p.Text)
	}
	// As intent.Observe: a post answering a person's top-level message
	// gives them the channel's top-level window; their follow-up continues
	// this conversation.
	if p.Answering != "" && p.AnsweringTop && p.AnsweringUser != "" && !c.At().Before(f.top.At) {
		f.top = topExchange{User: p.AnsweringUser, Conv: conv, At: c.At()}
	}
}

// ConversationOfThread is the conversation thread belongs to: the one it
// was started in, or itself.
func (f *Channel) ConversationOfThread(thread string) string {
	if conv, ok := f.threadConv.M[thread]; ok {
		return conv
	}
	return thread
}

// ConversationOfMessage is the conversation of a routed message or one of
// the bot's posts, if the fold still knows it.
func (f *Channel) ConversationOfMessage(id string) (string, bool) {
	conv, ok := f.msgConv.M[id]
	return conv, ok
}

// ToplevelExchange is the exchange that opened the channel's latest
// top-level window: whom the bot answered, that answer's conversation and
// when it was posted (the window runs from then).
func (f *Channel) ToplevelExchange() (user, conv string, at time.Time, ok bool) {
	return f.top.User, f.top.Conv, f.top.At, f.top.User != ""
}
