package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

// Slack's agent surface (docs/slack.md): when the app has the Agents & AI
// Apps feature (manifest assistant_view) and the assistant:write scope, a
// run's checklist is a streamed message (chat.startStream) whose plan and
// tasks are task_update chunks, the final answer streams into it, and the
// thread shows "is thinking…" (assistant.threads.setStatus) while a model
// call or a tool runs. Without the scope, nothing here is used.

// AgentScope is the bot scope that turns the agent surface on; Slack
// grants it only to an app with the agent feature (assistant_view).
const AgentScope = "assistant:write"

// DefaultStreamChunkChars is the most text one chat.appendStream carries.
const DefaultStreamChunkChars = 400

// thinkingStatus is what the thread shows while a run works.
const thinkingStatus = "is thinking…"

var (
	_ core.Streamer = (*Adapter)(nil)
	_ core.Typing   = (*Adapter)(nil)
)

// WithStreamChunk sets the most text one chat.appendStream carries
// (default DefaultStreamChunkChars): a longer answer is appended in pieces,
// each through the channel's pacer.
func WithStreamChunk(chars int) Option {
	return func(a *Adapter) {
		if chars > 0 {
			a.streamChunk = chars
		}
	}
}

// detectAgent reads the token's scopes (auth.test's X-OAuth-Scopes) and
// turns the agent surface on when assistant:write is among them. Run calls
// it at start; Streams calls it first if no detection has succeeded yet (a
// run resumed at start-up may post before Run got that far).
func (a *Adapter) detectAgent(ctx context.Context) bool {
	a.agentMu.Lock()
	defer a.agentMu.Unlock()
	res, scopes, err := a.rawCall(ctx, "auth.test", a.cfg.BotToken)
	if err != nil || !res.OK {
		a.log.Warn("slack: could not read the token's scopes; the agent surface is off for now", "error", err, "code", res.Error)
		return false
	}
	on := slices.Contains(scopes, AgentScope)
	a.agent.Store(on)
	if !a.agentKnown.Swap(true) || on != a.agentWas {
		if on {
			a.log.Info("slack: agent surface on (" + AgentScope + " granted): runs stream their plan and answer")
		} else {
			a.log.Info("slack: agent surface off (no " + AgentScope + " scope): runs use the checklist message")
		}
	}
	a.agentWas = on
	return on
}

// AgentSurface reports whether the agent surface is on (see detectAgent).
func (a *Adapter) AgentSurface() bool { return a.agent.Load() }

// Streams implements core.Streamer: a stream needs the agent surface and a
// thread to reply in.
func (a *Adapter) Streams(ctx context.Context, scope core.Scope) bool {
	if scope.Thread == "" {
		return false
	}
	if !a.agentKnown.Load() {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return a.detectAgent(dctx)
	}
	return a.agent.Load()
}

// streamState is what this process knows of one streamed message.
type streamState struct {
	known   bool   // sent is what the message holds (else read it first)
	sent    string // the text appended so far
	stopped bool
	last    time.Time // when text was last appended
}

type streamBook struct {
	mu sync.Mutex
	m  map[string]*streamState // message ts → state
}

func (b *streamBook) get(ts string) *streamState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*streamState{}
	}
	s, ok := b.m[ts]
	if !ok {
		if len(b.m) >= 10000 {
			clear(b.m) // bounded: an unknown stream is read from Slack again
		}
		s = &streamState{}
		b.m[ts] = s
	}
	return s
}

// StartStream implements core.Streamer with chat.startStream in the
// thread, showing u's plan. A key already started returns its message; a
// resumed start first looks in the thread for the stream an earlier
// process started: stopped, it carries out.Key in its metadata (when the
// stop was given that key); still open, it is the bot's message with no
// key at all (every other message of the bot carries one).
func (a *Adapter) StartStream(ctx context.Context, out core.Outbound, u core.StreamUpdate) (core.MessageRef, error) {
	out, u = defangOutbound(out), defangUpdate(u)
	if err := checkScope(out.Scope); err != nil {
		return core.MessageRef{}, err
	}
	if out.Key == "" || out.Scope.Thread == "" {
		return core.MessageRef{}, errors.New("slack: a stream needs a key and a thread")
	}
	unlock := a.ledger.lock(out.Key)
	defer unlock()
	if ref, ok := a.ledger.posts.Get(out.Key); ok {
		return ref, nil
	}
	scope := out.Scope
	scope.Platform = Platform
	if scope.Workspace == "" {
		scope.Workspace = a.identity().teamID
	}
	if out.Resumed {
		ref, found, err := a.findStream(ctx, scope, out.Key, a.now().Add(-resumeLookback))
		if err != nil {
			return core.MessageRef{}, fmt.Errorf("slack: stream %s may have started and the check failed: %w", out.Key, err)
		}
		if found {
			a.log.InfoContext(ctx, "slack: resumed stream found in the thread; not starting another", "channel", scope.Channel, "ts", ref.ID)
			a.ledger.posts.Put(out.Key, ref)
			return ref, nil
		}
	}
	opts := []slack.MsgOption{slack.MsgOptionTS(scope.Thread), slack.MsgOptionTaskDisplayMode(slack.TaskDisplayModePlan)}
	if chunks := planChunks(u); len(chunks) > 0 {
		opts = append(opts, slack.MsgOptionChunks(chunks...))
	}
	if u.Recipient != "" {
		opts = append(opts, slack.MsgOptionRecipientUserID(u.Recipient), slack.MsgOptionRecipientTeamID(scope.Workspace))
	}
	var ts string
	err := a.pacer.do(ctx, scope.Channel, core.PriorityNormal, "", func(ctx context.Context) error {
		var err error
		_, ts, err = a.api.StartStreamContext(ctx, scope.Channel, opts...)
		return err
	})
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("slack: chat.startStream: %w", err)
	}
	ss := a.streams.get(ts)
	a.streams.mu.Lock()
	ss.known = true
	a.streams.mu.Unlock()
	ref := core.MessageRef{Scope: scope, ID: ts, At: parseTSOr(ts, a.now())}
	a.ledger.posts.Put(out.Key, ref)
	return ref, nil
}

// AppendStream implements core.Streamer: u's plan and tasks, then the part
// of u.Text the message lacks, in pieces of at most streamChunk
// characters, each paced through the channel's queue.
func (a *Adapter) AppendStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate) error {
	u = defangUpdate(u)
	u.Text = withoutOpenToken(u.Text)
	return a.appendStream(ctx, ref, u, true)
}

func (a *Adapter) appendStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate, tasks bool) error {
	ss := a.streams.get(ref.ID)
	a.streams.mu.Lock()
	known, sent, stopped := ss.known, ss.sent, ss.stopped
	a.streams.mu.Unlock()
	if !known {
		text, isStopped, err := a.streamText(ctx, ref)
		if err != nil {
			return fmt.Errorf("slack: read the stream's text: %w", err)
		}
		sent, stopped = text, isStopped
		a.streams.mu.Lock()
		ss.known, ss.sent, ss.stopped = true, sent, stopped
		a.streams.mu.Unlock()
	}
	rest := ""
	if len(u.Text) > len(sent) {
		if !strings.HasPrefix(u.Text, sent) {
			// Slack rendered the text otherwise: appending now could only
			// repeat what the message shows.
			a.log.WarnContext(ctx, "slack: the stream's text differs from the answer; appending nothing more", "ts", ref.ID)
		} else {
			rest = u.Text[len(sent):]
		}
	}
	if stopped {
		if rest != "" {
			return core.ErrStreamEnded
		}
		return nil
	}
	pieces := splitRunes(rest, a.streamChunk)
	if tasks {
		chunks := planChunks(u)
		if len(pieces) > 0 {
			chunks = append(chunks, slack.NewMarkdownTextChunk(pieces[0]))
		}
		// Task-only updates are state: a queued one is replaced by a newer.
		coalesce, prio := "stream:"+ref.ID, core.PriorityEdit
		if len(pieces) > 0 {
			coalesce, prio = "", core.PriorityHigh
		}
		if len(chunks) > 0 {
			if err := a.streamCall(ctx, ref, ss, prio, coalesce, firstOr(pieces), chunks); err != nil {
				return err
			}
		}
		if len(pieces) > 0 {
			pieces = pieces[1:]
		}
	}
	for _, p := range pieces {
		if err := a.streamCall(ctx, ref, ss, core.PriorityHigh, "", p, []slack.StreamChunk{slack.NewMarkdownTextChunk(p)}); err != nil {
			return err
		}
	}
	return nil
}

// streamCall sends one chat.appendStream carrying text (appended) and
// chunks. An answer lost on the way leaves the text in doubt: the next
// call reads the message first.
func (a *Adapter) streamCall(ctx context.Context, ref core.MessageRef, ss *streamState, prio core.Priority, coalesce, text string, chunks []slack.StreamChunk) error {
	if text != "" {
		// One piece of text per pace interval: the channel's queue spaces
		// only calls that wait in it together, and these come one by one.
		a.streams.mu.Lock()
		wait := ss.last.Add(a.pace.interval).Sub(a.now())
		a.streams.mu.Unlock()
		if wait > 0 {
			if err := sleep(ctx, wait); err != nil {
				return fmt.Errorf("slack: chat.appendStream: %w", err)
			}
		}
	}
	err := a.pacer.do(ctx, ref.Scope.Channel, prio, coalesce, func(ctx context.Context) error {
		_, _, err := a.api.AppendStreamContext(ctx, ref.Scope.Channel, ref.ID, slack.MsgOptionChunks(chunks...))
		return err
	})
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	switch {
	case err == nil:
		ss.sent += text
		if text != "" {
			ss.last = a.now()
		}
		return nil
	case streamGone(err):
		ss.stopped = true
		return fmt.Errorf("slack: chat.appendStream: %w", core.ErrStreamEnded)
	case a.ambiguous(err):
		ss.known = false
	}
	return fmt.Errorf("slack: chat.appendStream: %w", err)
}

// StopStream implements core.Streamer: the rest of u.Text, then
// chat.stopStream with u's plan and tasks and the key in metadata, then
// the thread's status cleared.
func (a *Adapter) StopStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate) error {
	u = defangUpdate(u)
	if err := a.appendStream(ctx, ref, u, false); err != nil && !errors.Is(err, core.ErrStreamEnded) {
		return err
	}
	ss := a.streams.get(ref.ID)
	a.streams.mu.Lock()
	stopped := ss.stopped
	a.streams.mu.Unlock()
	if !stopped {
		var opts []slack.MsgOption
		if chunks := planChunks(u); len(chunks) > 0 {
			opts = append(opts, slack.MsgOptionChunks(chunks...))
		}
		if u.Key != "" {
			opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{EventType: metaEventType, EventPayload: map[string]any{"key": u.Key}}))
		}
		err := a.pacer.do(ctx, ref.Scope.Channel, core.PriorityHigh, "", func(ctx context.Context) error {
			_, _, err := a.api.StopStreamContext(ctx, ref.Scope.Channel, ref.ID, opts...)
			return err
		})
		if err != nil && !streamGone(err) {
			return fmt.Errorf("slack: chat.stopStream: %w", err)
		}
		a.streams.mu.Lock()
		ss.stopped = true
		a.streams.mu.Unlock()
	}
	if err := a.settleStreamText(ctx, ref, ss, u); err != nil {
		return err
	}
	if err := a.setStatus(ctx, ref.Scope, ""); err != nil {
		a.log.DebugContext(ctx, "slack: clearing the thread status failed", "channel", ref.Scope.Channel, "error", err)
	}
	return nil
}

// settleStreamText makes a stopped stream hold exactly u.Text when the
// text streamed into it is not that answer: text shown while the model
// was still writing, from a call that failed or a process that died
// before it finished, and then answered otherwise. The stopped message is
// an ordinary message of the bot, so chat.update replaces its text (its
// key stays in the metadata). A stream stopped without an answer (the run
// failed, was stopped or paused after a model call was cut) would keep the
// cut text as if it were one: it is replaced by the plan's title, which
// says what happened. Nothing to settle when the text is already right.
func (a *Adapter) settleStreamText(ctx context.Context, ref core.MessageRef, ss *streamState, u core.StreamUpdate) error {
	want := u.Text
	if strings.TrimSpace(want) == "" {
		want = u.Title
	}
	if strings.TrimSpace(want) == "" {
		return nil
	}
	a.streams.mu.Lock()
	known, sent := ss.known, ss.sent
	a.streams.mu.Unlock()
	if !known {
		text, _, err := a.streamText(ctx, ref)
		if err != nil {
			return fmt.Errorf("slack: read the stopped stream's text: %w", err)
		}
		sent = text
	}
	if strings.TrimSpace(u.Text) == "" && strings.TrimSpace(sent) == "" {
		return nil // no answer, and no text was streamed: the plan shows it all
	}
	if strings.TrimSpace(sent) == strings.TrimSpace(want) {
		return nil
	}
	opts := []slack.MsgOption{slack.MsgOptionText(defang(want), false)}
	if u.Key != "" {
		opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{EventType: metaEventType, EventPayload: map[string]any{"key": u.Key}}))
	}
	err := a.pacer.update(ctx, ref.Scope.Channel, core.PriorityHigh, "", func(ctx context.Context) error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, ref.Scope.Channel, ref.ID, opts...)
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: chat.update of the stopped stream's text: %w", err)
	}
	a.log.InfoContext(ctx, "slack: the streamed text was not the answer; replaced it", "channel", ref.Scope.Channel, "ts", ref.ID)
	a.streams.mu.Lock()
	ss.known, ss.sent = true, want
	a.streams.mu.Unlock()
	return nil
}

// streamGone reports Slack's answer for a stream that is not open.
func streamGone(err error) bool {
	var se slack.SlackErrorResponse
	return errors.As(err, &se) && (se.Err == "message_not_in_streaming_state" || se.Err == "message_not_found")
}

// findStream looks in the thread for the stream keyed key: a message of
// the bot stopped with key in its metadata, or else one without a key (a
// stream started and never stopped; see StartStream).
func (a *Adapter) findStream(ctx context.Context, scope core.Scope, key string, since time.Time) (core.MessageRef, bool, error) {
	msgs, err := a.threadMessages(ctx, scope.Channel, scope.Thread, fmt.Sprintf("%d.000000", since.Unix()))
	if err != nil {
		return core.MessageRef{}, false, err
	}
	self := a.identity()
	var open *slack.Message
	for i, m := range msgs {
		if m.Timestamp == scope.Thread || m.BotID == "" || (self.botID != "" && m.BotID != self.botID) {
			continue
		}
		if m.Metadata.EventType == metaEventType {
			if k, _ := m.Metadata.EventPayload["key"].(string); k == key {
				return core.MessageRef{Scope: scope, ID: m.Timestamp, At: parseTSOr(m.Timestamp, a.now())}, true, nil
			}
			continue
		}
		if open == nil {
			open = &msgs[i]
		}
	}
	if open == nil {
		return core.MessageRef{}, false, nil
	}
	return core.MessageRef{Scope: scope, ID: open.Timestamp, At: parseTSOr(open.Timestamp, a.now())}, true, nil
}

// streamText reads what a streamed message holds now, and whether it was
// stopped (chat.stopStream gave it its key).
func (a *Adapter) streamText(ctx context.Context, ref core.MessageRef) (string, bool, error) {
	thread := ref.Scope.Thread
	if thread == "" {
		thread = ref.ID
	}
	msgs, err := a.threadMessages(ctx, ref.Scope.Channel, thread, ref.ID)
	if err != nil {
		return "", false, err
	}
	for _, m := range msgs {
		if m.Timestamp == ref.ID {
			return m.Text, m.Metadata.EventType == metaEventType, nil
		}
	}
	return "", false, fmt.Errorf("message %s not in thread %s", ref.ID, thread)
}

// threadMessages reads a thread (conversations.replies, with metadata)
// from oldest on, at most five pages.
func (a *Adapter) threadMessages(ctx context.Context, channel, thread, oldest string) ([]slack.Message, error) {
	var out []slack.Message
	cursor := ""
	for page := 0; page < 5; page++ {
		if err := a.historyWait(ctx); err != nil {
			return nil, err
		}
		msgs, next, err := a.replies(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: channel, Timestamp: thread, Oldest: oldest, Inclusive: true, Cursor: cursor,
			Limit: 200, IncludeAllMetadata: true,
		})
		if err != nil {
			return nil, fmt.Errorf("conversations.replies: %w", err)
		}
		out = append(out, msgs...)
		if next == "" {
			break
		}
		cursor = next
	}
	return out, nil
}

// planChunks renders u's plan: its title, then one task_update per task.
func planChunks(u core.StreamUpdate) []slack.StreamChunk {
	var chunks []slack.StreamChunk
	if u.Title != "" || len(u.Tasks) > 0 {
		chunks = append(chunks, slack.NewPlanUpdateChunk(u.Title))
	}
	for _, t := range u.Tasks {
		c := slack.NewTaskUpdateChunk(t.ID, t.Title)
		c.Status = slack.TaskCardStatus(t.Status)
		c.Output = t.Output
		chunks = append(chunks, c)
	}
	return chunks
}

// Typing implements core.Typing with the thread's status ("is thinking…")
// when the agent surface is on; otherwise it does nothing.
func (a *Adapter) Typing(ctx context.Context, scope core.Scope) error {
	if !a.Streams(ctx, scope) {
		return nil
	}
	return a.setStatus(ctx, scope, thinkingStatus)
}

// TypingEvery implements core.Typing: Slack keeps a status until it is
// cleared or the app replies, so it is asked for again only now and then.
func (a *Adapter) TypingEvery() time.Duration { return 20 * time.Second }

func (a *Adapter) setStatus(ctx context.Context, scope core.Scope, status string) error {
	if scope.Thread == "" || !a.Streams(ctx, scope) {
		// Streams reads the scopes when nothing has yet: a resumed run
		// clears the status a dead process left, before Run got that far.
		return nil
	}
	// A decoration: on the method's own budget, dropped over it (Slack
	// clears the status itself when the answer is posted).
	err := a.pacer.decorate(ctx, keyStatus, func(ctx context.Context) error {
		return a.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
			ChannelID: scope.Channel, ThreadTS: scope.Thread, Status: status,
		})
	})
	if err != nil {
		return fmt.Errorf("slack: assistant.threads.setStatus: %w", err)
	}
	return nil
}

// splitRunes cuts s into pieces of at most n runes, at a space or newline
// when there is one in the piece's second half.
func splitRunes(s string, n int) []string {
	var out []string
	for s != "" {
		r := []rune(s)
		if len(r) <= n {
			out = append(out, s)
			break
		}
		cut := len(string(r[:n]))
		if i := strings.LastIndexAny(s[:cut], " \n"); i >= cut/2 {
			cut = i + 1
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func firstOr(pieces []string) string {
	if len(pieces) == 0 {
		return ""
	}
	return pieces[0]
}
