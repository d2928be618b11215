package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/pacer"
)

// stallPost holds the first post a replica is about to make until
// released: a drive slowed between journaling its step and posting it, as
// a replica that just lost the database is.
type stallPost struct {
	entered, release chan struct{}
	once             sync.Once
}

func newStallPost() *stallPost {
	return &stallPost{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *stallPost) ObservePost(context.Context, core.PostedMessage) error { return nil }

func (s *stallPost) ObservePostIntent(ctx context.Context, _ core.PostedMessage) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	return nil
}

// TestDeposedReplicaDoesNotPostAfterItsLeaseLapsed: replica a journals its
// answer step, then stalls before posting it while it cannot renew its
// lease (it lost the database). b takes the lapsed channel over, resumes
// the run from the journal and answers. When a's post goes on, a must not
// post: the platform knows no fence, so a's post would be the channel's
// second answer.
func TestDeposedReplicaDoesNotPostAfterItsLeaseLapsed(t *testing.T) {
	c := newCluster(t)
	stall := newStallPost()
	c.observers = map[string]core.PostObserver{"a": stall}
	a := c.add("a", coretest.NewScriptedModel(coretest.Text("answer from a")), func(l core.Leases) core.Leases { return renewFails{l} })
	b := c.add("b", coretest.NewScriptedModel(coretest.Text("answer from b")), nil)

	deposedPostsNothing(t, c, a, b, stall.entered, stall.release)
}

// deposedPostsNothing delivers a mention to a, waits until a holds its
// answer back (held), lets b take the lapsed channel over and answer, then
// lets a go on (release): a must post nothing.
func deposedPostsNothing(t *testing.T, c *cluster, a, b *replica, held, release chan struct{}) {
	t.Helper()
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatalf("a never came to post\n%s", a.logs.String())
	}
	waitFor(t, "b to take the lapsed channel over and answer", func() bool {
		return answers(b.s, "answer from") == 1 && c.count("C1", core.KindRunCompleted) == 1
	})
	close(release)
	waitFor(t, "a to post or refuse to", func() bool {
		return strings.Contains(a.logs.String(), "not renewed in time") || answers(a.s, "answer from") > 0
	})
	if n := answers(a.s, "answer from"); n != 0 {
		t.Errorf("the deposed replica posted its answer %d times (b answered too)", n)
	}
	if n := c.count("C1", core.KindRunCompleted); n != 1 {
		t.Errorf("%d run.completed, want 1", n)
	}
}

// TestOutageNoticeOnlyWhenNoOtherReplicaMayDrive: a replica whose lease
// lapsed while it could not renew puts the "blocked" notice on its run
// only when it saw no other live replica (then nobody else can have taken
// the run over); with another replica alive it withholds it, since that
// replica may own the run and its checklist now.
func TestOutageNoticeOnlyWhenNoOtherReplicaMayDrive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others int
	}{{"alone", 0}, {"with another replica", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.outageNotice = 50 * time.Millisecond
			// b, once it has taken the run over, stalls on posting too: the
			// run stays unfinished, as it looks to a replica that cannot read
			// the journal.
			stall, stallB := newStallPost(), newStallPost()
			c.observers = map[string]core.PostObserver{"a": stall, "b": stallB}
			defer close(stallB.release)
			a := c.add("a", coretest.NewScriptedModel(coretest.Text("answer from a")), func(l core.Leases) core.Leases { return renewFails{l} })
			var b *replica
			if tc.others > 0 {
				b = c.add("b", coretest.NewScriptedModel(coretest.Text("answer from b")), nil)
			}
			deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
				Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
			select {
			case <-stall.entered:
			case <-time.After(10 * time.Second):
				t.Fatalf("a never came to post\n%s", a.logs.String())
			}
			if b == nil {
				waitFor(t, "a's channel lease to lapse", func() bool {
					lapsed, err := c.j.Lapsed(t.Context(), core.ChannelLeasePrefix)
					return err == nil && len(lapsed) > 0
				})
			} else {
				select {
				case <-stallB.entered: // b resumed the run and is about to post a's journaled answer
				case <-time.After(10 * time.Second):
					t.Fatalf("b never took the lapsed channel over\n%s", b.logs.String())
				}
			}
			close(stall.release)
			if b == nil {
				waitFor(t, "the blocked notice", func() bool { return answers(a.s, "Blocked: the database is unavailable") == 1 })
				if n := answers(a.s, "answer from a"); n != 0 {
					t.Errorf("a posted its answer %d times on a lapsed lease", n)
				}
				return
			}
			waitFor(t, "a to withhold the notice", func() bool {
				return strings.Contains(a.logs.String(), "outage notice withheld")
			})
			if n := answers(a.s, "Blocked"); n != 0 {
				t.Errorf("a showed the blocked notice %d times with another replica alive", n)
			}
			if n := answers(a.s, "answer from a"); n != 0 {
				t.Errorf("a posted its answer %d times on a lapsed lease", n)
			}
		})
	}
}

// pacedSurface posts through an adapter's write queue (internal/pacer), as
// Slack, Discord and Telegram do. Its first post finds the queue busy
// (a call held until release, as pacing or a rate limit holds one) and the
// replica loses the database right then: after the engine checked its
// lease, before the platform sees the post.
type pacedSurface struct {
	core.Surface
	q               *pacer.Pacer[string]
	once            sync.Once
	lose            func()
	queued, release chan struct{}
}

func (s *pacedSurface) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	s.once.Do(func() {
		s.lose()
		busy := make(chan struct{})
		go func() {
			_ = s.q.Do(context.Background(), out.Scope.Channel, out.Priority, "", func(context.Context) error {
				close(busy)
				<-s.release
				return nil
			})
		}()
		<-busy
		close(s.queued)
	})
	var ref core.MessageRef
	err := s.q.Do(ctx, out.Scope.Channel, out.Priority, "", func(ctx context.Context) error {
		var err error
		ref, err = s.Surface.Post(ctx, out)
		return err
	})
	return ref, err
}

// renewStops is a lease table whose renewals fail once stop is set.
type renewStops struct {
	core.Leases
	stop *atomic.Bool
}

func (l renewStops) Renew(ctx context.Context, holder string, ttl time.Duration, names ...string) ([]string, error) {
	if l.stop.Load() {
		return nil, errors.New("connection refused")
	}
	return l.Leases.Renew(ctx, holder, ttl, names...)
}

// TestDeposedReplicaDoesNotPostWhatWaitedInItsWriteQueue: replica a passes
// the lease check for its answer, and the post then waits in the adapter's
// write queue while a cannot renew its lease. b takes the lapsed channel
// over, resumes the run and answers. When the queue reaches a's post, a
// must not post it: the check made before the wait no longer holds, and
// the post would be the channel's second answer (Telegram paces a group to
// one message every 3 s, so such waits are the rule there).
func TestDeposedReplicaDoesNotPostWhatWaitedInItsWriteQueue(t *testing.T) {
	c := newCluster(t)
	var stop atomic.Bool
	paced := &pacedSurface{
		q: pacer.New(time.Now, pacer.Config[string]{
			Rate:       func(string) (time.Duration, int) { return 0, 1 },
			RetryAfter: func(error) (time.Duration, bool) { return 0, false },
		}),
		lose:   func() { stop.Store(true) },
		queued: make(chan struct{}), release: make(chan struct{}),
	}
	c.surfaces = map[string]func(core.Surface) core.Surface{"a": func(s core.Surface) core.Surface {
		paced.Surface = s
		return paced
	}}
	a := c.add("a", coretest.NewScriptedModel(coretest.Text("answer from a")), func(l core.Leases) core.Leases { return renewStops{l, &stop} })
	b := c.add("b", coretest.NewScriptedModel(coretest.Text("answer from b")), nil)

	deposedPostsNothing(t, c, a, b, paced.queued, paced.release)
}
