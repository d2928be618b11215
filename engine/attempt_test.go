package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// attemptingSurface is the fake surface with core.AttemptedPoster, as
// Telegram has it: it asks whether each post was attempted before, records
// the attempt, then posts.
type attemptingSurface struct {
	*coretest.FakeSurface
	mu   sync.Mutex
	made map[string][]bool // key → what Made said, per call
}

func (s *attemptingSurface) PostAttempted(ctx context.Context, out core.Outbound, att core.PostAttempts) (core.MessageRef, error) {
	made := att.Made(ctx, out.Key)
	s.mu.Lock()
	s.made[out.Key] = append(s.made[out.Key], made)
	s.mu.Unlock()
	if err := att.Record(ctx, out.Key); err != nil {
		return core.MessageRef{}, err
	}
	return s.Post(ctx, out)
}

func (s *attemptingSurface) madeAnswers() map[string][]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]bool{}
	for k, v := range s.made {
		out[k] = append([]bool(nil), v...)
	}
	return out
}

// On a surface that takes attempt records, every post's message.attempted
// is journaled before its message.posted, and the record survives a
// restart: the answer whose send failed (outcome unknown to the engine) is
// asked for again after the restart with Made true, while every post asked
// for the first time gets Made false. A surface without the capability gets
// no such record.
func TestPostAttemptsAreJournaledBeforeTheSend(t *testing.T) {
	var as *attemptingSurface
	m := coretest.NewScriptedModel(coretest.Text("the answer"))
	h := newHarness(t, m, nil, func(c *engine.Config) {
		as = &attemptingSurface{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface), made: map[string][]bool{}}
		c.Surfaces = map[string]core.Surface{platform: as}
	})
	h.s.FailPost = func(out core.Outbound) error {
		if out.Text == "the answer" {
			return errors.New("response lost")
		}
		return nil
	}
	h.deliver(h.mention(alice, "C1", "hello"))
	h.idle()
	h.s.FailPost = nil
	h.restart()
	h.idle()

	var answer string
	for _, p := range h.s.Posts() {
		if p.Out.Text == "the answer" {
			if answer != "" {
				t.Fatalf("the answer was posted twice")
			}
			answer = p.Out.Key
		}
	}
	if answer == "" {
		t.Fatalf("no answer posted; kinds %v", h.kinds("C1"))
	}
	for key, made := range as.madeAnswers() {
		// The first ask of every post finds no attempt; the answer's
		// later ones (the engine's retries, then the drive after the
		// restart, the last) find the first one's record.
		want := []bool{false}
		if key == answer {
			want = append(want, slices.Repeat([]bool{true}, len(made)-1)...)
			if len(made) < 2 {
				t.Errorf("the answer was asked for %d times, want again after the restart", len(made))
			}
		}
		if fmt.Sprint(made) != fmt.Sprint(want) {
			t.Errorf("post %s: Made answered %v, want %v", key, made, want)
		}
	}
	attempted := map[string]uint64{}
	for _, c := range h.j.All(chanScope("C1").Key()) {
		switch c.Kind() {
		case core.KindMessageAttempted:
			p, _ := core.Decode[*core.MessageAttempted](c)
			if _, ok := attempted[p.EffectID]; !ok {
				attempted[p.EffectID] = c.Seq()
			}
		case core.KindMessagePosted:
			p, _ := core.Decode[*core.MessagePosted](c)
			if _, ok := attempted[p.EffectID]; !ok {
				t.Errorf("message.posted %s (seq %d) with no message.attempted before it", p.EffectID, c.Seq())
			}
		}
	}
	h.verify("C1")
}

// Surfaces that can look their posts up pay no journal write per post.
func TestNoAttemptRecordsWithoutTheCapability(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("plain answer"))
	h := newHarness(t, m, nil)
	h.deliver(h.mention(alice, "C1", "hello"))
	h.idle()
	if _, ok := h.s.Find("plain answer"); !ok {
		t.Fatalf("no answer; kinds %v", h.kinds("C1"))
	}
	if n := h.count("C1", core.KindMessageAttempted); n != 0 {
		t.Fatalf("%d message.attempted on a surface without core.AttemptedPoster", n)
	}
}
