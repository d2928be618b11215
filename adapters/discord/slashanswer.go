package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// Interactions keeps, for an interaction token's life, what answering a
// slash command needs: which interaction a response message id belongs to,
// and which post took that response. The journal holds the rest (the
// message, its run, the posts), so the record is needed for 15 minutes
// only. Shared by the replicas (store/redis.KV) so that the one resuming a
// run after the deferring one died still answers through the interaction;
// the default is in-process.
type Interactions interface {
	// SetNX stores val under key for ttl unless key holds a value and
	// reports whether it stored.
	SetNX(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error)
	Get(ctx context.Context, key string) ([]byte, bool, error)
}

// WithInteractions replaces the in-process interaction records, e.g. with
// store/redis's KV when several replicas hold gateway sessions.
func WithInteractions(s Interactions) Option {
	return func(a *Adapter) {
		if s != nil {
			a.slashes = s
		}
	}
}

// slashRecord is what follows up an interaction: its token (a credential
// for this interaction's webhook, which is why it is kept out of the
// journal) and whether the response is ephemeral.
type slashRecord struct {
	App       string `json:"app"`
	Token     string `json:"token"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
}

func (r slashRecord) interaction() *discordgo.Interaction {
	return &discordgo.Interaction{AppID: r.App, Token: r.Token, Type: discordgo.InteractionApplicationCommand}
}

func slashKey(msg string) string  { return "slash:" + msg }
func answerKey(msg string) string { return "answer:" + msg }

func (a *Adapter) rememberSlash(ctx context.Context, msg string, r slashRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = a.slashes.SetNX(ctx, slashKey(msg), b, interactionWindow*time.Second)
	return err
}

// slashOfMessage returns the interaction whose response msg is.
func (a *Adapter) slashOfMessage(ctx context.Context, msg string) (slashRecord, bool) {
	if msg == "" {
		return slashRecord{}, false
	}
	b, ok, err := a.slashes.Get(ctx, slashKey(msg))
	if err != nil {
		a.log.Warn("discord: interaction record unreadable", "err", err)
		return slashRecord{}, false
	}
	var r slashRecord
	if !ok || json.Unmarshal(b, &r) != nil || r.Token == "" {
		return slashRecord{}, false
	}
	return r, true
}

// AnswersElsewhere implements core.AnswersElsewhere: a slash command's
// answer goes in its interaction's response.
func (a *Adapter) AnswersElsewhere(ctx context.Context, msgID string) bool {
	_, ok := a.slashOfMessage(ctx, msgID)
	return ok
}

// answerSlash puts out in the response of the slash command it answers,
// when it is an answer (or a final notice: a high-priority text) and the
// first post with its key to claim that response; otherwise ok is false
// and out is posted as usual, in the run's thread. A second post with the
// claiming key (re-issued after a crash) edits the same response again.
func (a *Adapter) answerSlash(ctx context.Context, out core.Outbound) (ref core.MessageRef, ok bool, err error) {
	if out.Answering == "" || out.Key == "" || out.Card != nil || out.Priority != core.PriorityHigh {
		return ref, false, nil
	}
	rec, found := a.slashOfMessage(ctx, out.Answering)
	if !found {
		return ref, false, nil
	}
	ttl := interactionWindow * time.Second
	if _, err := a.slashes.SetNX(ctx, answerKey(out.Answering), []byte(out.Key), ttl); err != nil {
		return ref, false, fmt.Errorf("discord: claim the interaction response: %w", err)
	}
	holder, _, err := a.slashes.Get(ctx, answerKey(out.Answering))
	if err != nil {
		return ref, false, fmt.Errorf("discord: claim the interaction response: %w", err)
	}
	if string(holder) != out.Key {
		return ref, false, nil // the response already carries another answer
	}
	parts := splitMessage(out.Text, a.cfg.MaxMessageChars)
	if len(parts) == 0 {
		return ref, false, nil
	}
	if err := a.editOriginal(ctx, rec.interaction(), parts[0]); err != nil {
		return ref, false, err
	}
	scope := out.Scope
	scope.Platform = Platform
	ref = core.MessageRef{Scope: scope, ID: out.Answering, At: a.now()}
	switch {
	case len(parts) > 1 && rec.Ephemeral:
		// A private answer stays private: the rest follows as ephemeral
		// follow-ups on the same interaction, never in the channel. (A
		// re-issue after a crash may send them again: follow-ups carry no
		// nonce.)
		for i, p := range parts[1:] {
			if _, err := a.sess.FollowupMessageCreate(rec.interaction(), false, &discordgo.WebhookParams{
				Content: p, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: safeMentions(),
			}, discordgo.WithContext(ctx)); err != nil {
				return ref, true, fmt.Errorf("discord: ephemeral follow-up %d of %d: %w", i+2, len(parts), err)
			}
		}
	case len(parts) > 1:
		// The rest of a long answer follows in the thread on the response,
		// keyed (so nonce-enforced) like any post.
		rest := out
		rest.Key, rest.Answering, rest.Text = out.Key+"/rest", "", joinParts(parts[1:])
		if _, err := a.Post(ctx, rest); err != nil {
			return ref, true, err
		}
	}
	return ref, true, nil
}

func joinParts(p []string) string {
	var b []byte
	for i, s := range p {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, s...)
	}
	return string(b)
}

// memInteractions is the in-process Interactions of a single replica.
type memInteractions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]memEntry
}

type memEntry struct {
	val []byte
	exp time.Time
}

func newMemInteractions(now func() time.Time) *memInteractions {
	return &memInteractions{now: now, m: map[string]memEntry{}}
}

func (s *memInteractions) SetNX(_ context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) > 10000 {
		for k, e := range s.m {
			if now.After(e.exp) {
				delete(s.m, k)
			}
		}
	}
	if e, ok := s.m[key]; ok && !now.After(e.exp) {
		return false, nil
	}
	s.m[key] = memEntry{val: append([]byte(nil), val...), exp: now.Add(ttl)}
	return true, nil
}

func (s *memInteractions) Get(_ context.Context, key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok || s.now().After(e.exp) {
		return nil, false, nil
	}
	return e.val, true, nil
}
