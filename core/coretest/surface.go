package coretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Post is one message a FakeSurface holds.
type Post struct {
	Ref core.MessageRef
	Out core.Outbound
}

// Upload is one file a FakeSurface received.
type Upload struct {
	Scope core.Scope
	File  core.File
}

// Whisper is one ephemeral message: shown only to User.
type Whisper struct {
	Scope core.Scope
	User  string
	Text  string
}

// Edit is one Update call a FakeSurface received.
type Edit struct {
	Ref core.MessageRef
	Out core.Outbound
}

// FakeSurface is a recording core.Surface. Posts are deduplicated by
// idempotency key exactly as the contract asks of real surfaces: a second
// Post with a known key returns the first message and posts nothing.
type FakeSurface struct {
	name string
	self core.Identity

	mu        sync.Mutex
	posts     []Post
	byKey     map[string]int // key → index in posts
	attempts  map[string]int // key → Post calls
	unkeyed   int
	edits     []Edit
	current   map[string]core.Outbound // message id → current content
	reactions []string
	history   map[core.Scope][]core.Event
	whispers  []Whisper
	files     []Upload
	next      int
	// FailPost, when set, can fail a Post before it takes effect.
	FailPost func(out core.Outbound) error
	// FailUpdate, when set, can fail an Update before it takes effect.
	FailUpdate func(ref core.MessageRef, out core.Outbound) error
	// FailOpenDM, when set, can refuse to open a person's DM (a Telegram
	// user who never started the bot).
	FailOpenDM func(userID string) error
	// FailUpload, when set, can refuse a file (a Slack app without
	// files:write).
	FailUpload func(sc core.Scope, f core.File) error
}

var _ core.Surface = (*FakeSurface)(nil)

// NewFakeSurface returns a surface for platform name whose bot user is botID.
func NewFakeSurface(name, botID string) *FakeSurface {
	return &FakeSurface{
		name: name, self: core.Identity{UserID: botID, Handle: "marlowe", Name: "Marlowe"},
		byKey: map[string]int{}, attempts: map[string]int{}, current: map[string]core.Outbound{},
		history: map[core.Scope][]core.Event{},
	}
}

func (s *FakeSurface) Name() string { return s.name }

func (s *FakeSurface) Self(context.Context) (core.Identity, error) { return s.self, nil }

// Run blocks until ctx ends: tests call Engine.Deliver directly.
func (s *FakeSurface) Run(ctx context.Context, _ func(context.Context, core.Inbound) error) error {
	<-ctx.Done()
	return nil
}

func (s *FakeSurface) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if out.Key != "" {
		s.attempts[out.Key]++
		if i, ok := s.byKey[out.Key]; ok {
			return s.posts[i].Ref, nil
		}
	} else {
		s.unkeyed++
	}
	if s.FailPost != nil {
		if err := s.FailPost(out); err != nil {
			return core.MessageRef{}, err
		}
	}
	s.next++
	ref := core.MessageRef{Scope: out.Scope, ID: fmt.Sprintf("B%04d", s.next), At: time.Now()}
	if out.Card != nil {
		c := *out.Card
		out.Card = &c
	}
	s.posts = append(s.posts, Post{Ref: ref, Out: out})
	if out.Key != "" {
		s.byKey[out.Key] = len(s.posts) - 1
	}
	s.current[ref.ID] = out
	return ref, nil
}

func (s *FakeSurface) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.current[ref.ID]; !ok {
		return fmt.Errorf("fake surface: update of unknown message %s", ref.ID)
	}
	if s.FailUpdate != nil {
		if err := s.FailUpdate(ref, out); err != nil {
			return err
		}
	}
	if out.Card != nil {
		c := *out.Card
		out.Card = &c
	}
	s.edits = append(s.edits, Edit{Ref: ref, Out: out})
	s.current[ref.ID] = out
	return nil
}

func (s *FakeSurface) React(ctx context.Context, ref core.MessageRef, emoji string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reactions = append(s.reactions, ref.ID+":"+emoji)
	return nil
}

func (s *FakeSurface) OpenDM(ctx context.Context, userID string) (core.Scope, error) {
	if userID == "" {
		return core.Scope{}, errors.New("fake surface: open DM: empty user id")
	}
	if s.FailOpenDM != nil {
		if err := s.FailOpenDM(userID); err != nil {
			return core.Scope{}, err
		}
	}
	return core.Scope{Platform: s.name, Workspace: "W1", Channel: "D-" + userID}, nil
}

// SetHistory sets what History returns for thread.
func (s *FakeSurface) SetHistory(thread core.Scope, evs []core.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history[thread] = slices.Clone(evs)
}

func (s *FakeSurface) History(ctx context.Context, thread core.Scope, limit int) ([]core.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.history[thread]
	if limit > 0 && len(h) > limit {
		h = h[len(h)-limit:]
	}
	return slices.Clone(h), nil
}

// Reactions returns every React call as "messageID:emoji", in order.
func (s *FakeSurface) Reactions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactions)
}

// Posts returns every distinct post in order.
func (s *FakeSurface) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// PostsIn returns the posts made in one channel (any thread).
func (s *FakeSurface) PostsIn(channel string) []Post {
	var out []Post
	for _, p := range s.Posts() {
		if p.Ref.Scope.Channel == channel {
			out = append(out, p)
		}
	}
	return out
}

// Cards returns the posts that carry a card.
func (s *FakeSurface) Cards() []Post {
	var out []Post
	for _, p := range s.Posts() {
		if p.Out.Card != nil {
			out = append(out, p)
		}
	}
	return out
}

// Current returns a message's content after its latest edit.
func (s *FakeSurface) Current(id string) (core.Outbound, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.current[id]
	return o, ok
}

// Edits returns every Update call.
func (s *FakeSurface) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.edits)
}

// Attempts returns how many times Post was called with key.
func (s *FakeSurface) Attempts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[key]
}

// Unkeyed returns how many posts came without an idempotency key.
func (s *FakeSurface) Unkeyed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unkeyed
}

// Find returns the first post whose text contains substr.
func (s *FakeSurface) Find(substr string) (Post, bool) {
	for _, p := range s.Posts() {
		if strings.Contains(p.Out.Text, substr) {
			return p, true
		}
	}
	return Post{}, false
}

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(tb interface {
	Helper()
	Fatalf(string, ...any)
}, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

var _ core.FileUploader = (*FakeSurface)(nil)

// UploadFile records a file uploaded to sc.
func (s *FakeSurface) UploadFile(_ context.Context, sc core.Scope, f core.File) error {
	if s.FailUpload != nil {
		if err := s.FailUpload(sc, f); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files = append(s.files, Upload{Scope: sc, File: f})
	return nil
}

// Uploads returns the files uploaded, in order.
func (s *FakeSurface) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.files)
}

var _ core.Ephemeral = (*FakeSurface)(nil)

// PostEphemeral records a message only userID sees.
func (s *FakeSurface) PostEphemeral(_ context.Context, sc core.Scope, userID, text string) error {
	if userID == "" {
		return errors.New("ephemeral message without a user")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.whispers = append(s.whispers, Whisper{Scope: sc, User: userID, Text: text})
	return nil
}

// Whispers returns the ephemeral messages, in order.
func (s *FakeSurface) Whispers() []Whisper {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.whispers)
}
