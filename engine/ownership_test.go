package engine_test

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
)

// Several replicas on one journal, in one process: each has its own engine,
// surface connection and model, and they share the journal and its lease
// table as processes share PostgreSQL. An append wakes every replica, as
// PostgreSQL's NOTIFY does.

type replica struct {
	name string
	e    *engine.Engine
	s    *coretest.FakeSurface
	m    *coretest.ScriptedModel
	logs *syncBuffer
}

type cluster struct {
	t      *testing.T
	signer *core.Signer
	j      *coretest.MemJournal
	clk    *clock

	mu       sync.Mutex
	replicas []*replica
	// observers gives a replica, by name, a post observer.
	observers map[string]core.PostObserver
	// outageNotice, when set, is the replicas' OutageNotice.
	outageNotice time.Duration
	// surfaces wraps a replica's surface, by name (an adapter's own
	// machinery between the engine and the platform).
	surfaces map[string]func(core.Surface) core.Surface
	// router, when set, routes for every replica (default: mentions and
	// threads).
	router core.Router
	// checklistDelay, when set, is the replicas' ChecklistDelay (default
	// an hour: no checklist).
	checklistDelay time.Duration
}

// notifyingJournal wakes every replica after each append it commits.
type notifyingJournal struct {
	core.Journal
	c *cluster
}

func (n notifyingJournal) Append(ctx context.Context, d ...core.Draft) ([]core.Command, error) {
	cmds, err := n.Journal.Append(ctx, d...)
	n.notify(cmds, err)
	return cmds, err
}

func (n notifyingJournal) AppendAt(ctx context.Context, exp core.Expect, d ...core.Draft) ([]core.Command, error) {
	cmds, err := n.Journal.AppendAt(ctx, exp, d...)
	n.notify(cmds, err)
	return cmds, err
}

func (n notifyingJournal) notify(cmds []core.Command, err error) {
	if err != nil || len(cmds) == 0 {
		return
	}
	last := cmds[len(cmds)-1]
	n.c.mu.Lock()
	rs := append([]*replica(nil), n.c.replicas...)
	n.c.mu.Unlock()
	for _, r := range rs {
		go r.e.Wake(context.Background(), last.Channel(), last.Seq())
	}
}

// renewFails is a lease table this replica cannot renew in (it lost the
// database, say): its leases lapse while it still runs.
type renewFails struct{ core.Leases }

func (renewFails) Renew(context.Context, string, time.Duration, ...string) ([]string, error) {
	return nil, errors.New("connection refused")
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, signer: coretest.NewSigner(t), clk: &clock{t: time.Now()}}
	c.j = coretest.NewMemJournal(c.signer)
	return c
}

// add starts a replica. leases edits its lease table (nil: as is).
func (c *cluster) add(name string, m *coretest.ScriptedModel, leases func(core.Leases) core.Leases, tools ...core.Tool) *replica {
	c.t.Helper()
	r := &replica{name: name, s: coretest.NewFakeSurface(platform, botID), m: m, logs: &syncBuffer{}}
	reg, err := gate.NewRegistry(tools...)
	if err != nil {
		c.t.Fatal(err)
	}
	j := c.j.Reopen(c.signer)
	var ls core.Leases = j
	if leases != nil {
		ls = leases(ls)
	}
	var surf core.Surface = r.s
	if wrap := c.surfaces[name]; wrap != nil {
		surf = wrap(r.s)
	}
	var router core.Router = core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
		return ev.MentionsBot || ev.Scope.Thread != "", "test", nil
	})
	if c.router != nil {
		router = c.router
	}
	cfg := engine.Config{
		Journal: notifyingJournal{j, c}, Boundary: core.NewBoundary(time.Now), Tools: reg, Model: m,
		Surfaces: map[string]core.Surface{platform: surf},
		Router:   router,
		Logger:   slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		CardKey:  cardKey, RetryBackoff: time.Millisecond, ChecklistDelay: cmp.Or(c.checklistDelay, time.Hour),
		Leases: ls, Replica: name, LeaseTTL: 400 * time.Millisecond,
		DefaultPolicy: core.Policy{Approvers: []string{bob.ID}},
		PostObserver:  c.observers[name],
		OutageNotice:  c.outageNotice,
	}
	e, err := engine.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	r.e = e
	c.mu.Lock()
	c.replicas = append(c.replicas, r)
	c.mu.Unlock()
	if err := e.Start(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = e.Close() })
	return r
}

func (c *cluster) count(ch string, k core.Kind) int {
	n := 0
	for _, cmd := range c.j.All(chanScope(ch).Key()) {
		if cmd.Kind() == k {
			n++
		}
	}
	return n
}

func deliverTo(t *testing.T, r *replica, ev core.Event) {
	t.Helper()
	if err := r.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		t.Fatalf("deliver to %s: %v", r.name, err)
	}
}

func answers(s *coretest.FakeSurface, text string) int {
	n := 0
	for _, p := range s.Posts() {
		if strings.Contains(p.Out.Text, text) {
			n++
		}
	}
	return n
}

// A follow-up that reaches another replica is journaled there and driven by
// the channel's owner: the receiving replica never calls its model or posts.
func TestOnlyTheOwnerDrivesAChannel(t *testing.T) {
	c := newCluster(t)
	release := make(chan struct{})
	ma := coretest.NewScriptedModel(coretest.Text("first answer"), coretest.Text("second answer"))
	ma.OnCall = func(ctx context.Context, n int, v core.View) {
		if n == 1 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	mb := coretest.NewScriptedModel(coretest.Text("B answered"), coretest.Text("B answered"))
	a := c.add("a", ma, nil)
	b := c.add("b", mb, nil)

	root := core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> first", MentionsBot: true, At: time.Now()}
	deliverTo(t, a, root)
	waitFor(t, "a's first model call", func() bool { return ma.Calls() == 1 })

	// Bob's follow-up in the thread reaches replica b while a's run works.
	sc := chanScope("C1")
	sc.Thread = "M1"
	deliverTo(t, b, core.Event{Scope: sc, Visibility: core.Public, MessageID: "M2", Author: bob, Text: "and also this", At: time.Now()})
	close(release)
	waitFor(t, "the run to finish", func() bool { return c.count("C1", core.KindRunCompleted) >= 1 })
	_ = a.e.WaitIdle(t.Context())
	_ = b.e.WaitIdle(t.Context())

	if n := mb.Calls(); n != 0 {
		t.Errorf("replica b called its model %d times for a channel a owns", n)
	}
	if n := len(b.s.Posts()); n != 0 {
		t.Errorf("replica b posted %d messages for a channel a owns: %+v", n, b.s.Posts())
	}
	if n := c.count("C1", core.KindRunStarted); n != 1 {
		t.Errorf("%d runs started, want 1 (the follow-up steers the live run)", n)
	}
	if n := c.count("C1", core.KindRunCompleted); n != 1 {
		t.Errorf("%d runs completed, want 1", n)
	}
	// The follow-up reached the run: a's second view has Bob's message.
	seen := false
	for _, v := range ma.Views() {
		for _, m := range v.Messages {
			if strings.Contains(m.Text, "and also this") {
				seen = true
			}
		}
	}
	if !seen {
		t.Errorf("the owner's model never saw the follow-up journaled by b\n%s", a.logs.String())
	}
}

// A replica that can no longer renew its lease (it lost the database) is
// taken over once the lease lapses: another replica resumes the run from
// the journal, and the deposed one, when its model call returns, cannot
// write or post anything for the channel.
func TestLapsedChannelIsResumedByAnotherReplicaOnce(t *testing.T) {
	c := newCluster(t)
	a, ma, stuck := c.addStalled()
	mb := coretest.NewScriptedModel(coretest.Text("answer from b"))
	b := c.add("b", mb, nil)

	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
	waitFor(t, "a's model call", func() bool { return ma.Calls() == 1 })
	waitFor(t, "b to take the run over and answer", func() bool { return answers(b.s, "answer from b") == 1 })
	close(stuck) // a's model returns (or was interrupted when b ended the run)
	if err := a.e.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = b.e.WaitIdle(t.Context())
	if n := answers(a.s, "answer from a"); n != 0 {
		t.Errorf("the deposed replica posted its answer %d times", n)
	}
	if n := c.count("C1", core.KindRunCompleted); n != 1 {
		t.Errorf("%d run.completed, want 1", n)
	}
	if n := c.count("C1", core.KindModelStep); n != 1 {
		t.Errorf("%d model.step journaled, want 1 (only the owner's)", n)
	}
	if _, err := core.VerifyChannel(t.Context(), c.j, c.signer.Verifier(), chanScope("C1").Key()); err != nil {
		t.Fatal(err)
	}
}

// addStalled starts replica "a", which cannot renew its leases and whose
// model call waits until stuck is closed (or the call is interrupted).
func (c *cluster) addStalled() (*replica, *coretest.ScriptedModel, chan struct{}) {
	stuck := make(chan struct{})
	ma := coretest.NewScriptedModel(coretest.Text("answer from a"))
	ma.OnCall = func(ctx context.Context, n int, v core.View) {
		select {
		case <-stuck:
		case <-ctx.Done():
		}
	}
	return c.add("a", ma, func(l core.Leases) core.Leases { return renewFails{l} }), ma, stuck
}

// A click that reaches a replica which does not own the channel is decided
// against the journal there and the owner carries the run on: the tool
// runs once, on the owner.
func TestClickOnAnotherReplicaIsCarriedOutByTheOwner(t *testing.T) {
	c := newCluster(t)
	var la, lb toolLog
	ma := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "wipe", `{"id":"r1"}`)), coretest.Text("wiped it"))
	mb := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "wipe", `{"id":"r1"}`)), coretest.Text("wiped it"))
	a := c.add("a", ma, nil, wipeTool(&la))
	b := c.add("b", mb, nil, wipeTool(&lb))

	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> wipe r1", MentionsBot: true, At: time.Now()})
	waitFor(t, "the approval card", func() bool { return len(a.s.Cards()) > 0 })
	card := a.s.Cards()[0]
	var tok string
	for _, btn := range card.Out.Card.Actions {
		if btn.ID == "approve" {
			tok = btn.Token
		}
	}
	if tok == "" {
		t.Fatalf("no approve button on %+v", card.Out.Card)
	}
	if err := b.e.Deliver(t.Context(), core.Inbound{Click: &core.CardClick{Scope: card.Ref.Scope, Token: tok, By: bob, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to finish", func() bool { return c.count("C1", core.KindRunCompleted) == 1 })
	_ = a.e.WaitIdle(t.Context())
	_ = b.e.WaitIdle(t.Context())
	if got := la.get(); len(got) != 1 {
		t.Errorf("owner ran the tool %v, want once", got)
	}
	if got := lb.get(); len(got) != 0 {
		t.Errorf("the replica that received the click ran the tool %v", got)
	}
	if n := c.count("C1", core.KindApprovalResolved); n != 1 {
		t.Errorf("%d approval.resolved, want 1", n)
	}
}

// The deposed replica's model answers while the new owner is still working:
// its append is fenced, it posts nothing and hands the run over.
func TestDeposedReplicaCannotWrite(t *testing.T) {
	c := newCluster(t)
	stuck := make(chan struct{})
	ma := coretest.NewScriptedModel(coretest.Text("answer from a"))
	ma.OnCall = func(ctx context.Context, n int, v core.View) { <-stuck }
	a := c.add("a", ma, func(l core.Leases) core.Leases { return renewFails{l} })
	handedOver := func() bool { return strings.Contains(a.logs.String(), "run handed over") }
	mb := coretest.NewScriptedModel(coretest.Text("answer from b"))
	mb.OnCall = func(ctx context.Context, n int, v core.View) {
		close(stuck) // b holds the run now; let a's stale call return
		for !handedOver() && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	b := c.add("b", mb, nil)
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
	waitFor(t, "b's answer", func() bool { return answers(b.s, "answer from b") == 1 })
	if err := a.e.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !handedOver() {
		t.Errorf("a never saw its append fenced\n%s", a.logs.String())
	}
	if n := answers(a.s, "answer from a"); n != 0 {
		t.Errorf("the deposed replica posted its answer %d times", n)
	}
	if n := c.count("C1", core.KindModelStep); n != 1 {
		t.Errorf("%d model.step journaled, want 1", n)
	}
}

// A replica that stops (Close: drives cancelled, leases released) in the
// middle of a run leaves the run to the others: with no event in the channel
// and no lapsed lease to find, the unowned-work sweep still resumes it.
func TestReleasedChannelWithUnfinishedWorkIsResumed(t *testing.T) {
	c := newCluster(t)
	ma := coretest.NewScriptedModel(coretest.Text("answer from a"))
	started := make(chan struct{}, 1)
	ma.OnCall = func(ctx context.Context, n int, v core.View) {
		started <- struct{}{}
		<-ctx.Done() // a never answers: it is stopped mid-call
	}
	a := c.add("a", ma, nil)
	mb := coretest.NewScriptedModel(coretest.Text("answer from b"))
	b := c.add("b", mb, nil)
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
	<-started
	if err := a.e.Close(); err != nil {
		t.Fatal(err)
	}
	// The answer is posted before run.completed is journaled, and the
	// sweep logs its takeover once the resumed run is handed on (it may
	// finish first): await all three.
	waitFor(t, "b to resume the released channel's run through the unowned sweep", func() bool {
		return answers(b.s, "answer from b") == 1 && c.count("C1", core.KindRunCompleted) >= 1 &&
			strings.Contains(b.logs.String(), "took over an unowned channel")
	})
	if n := c.count("C1", core.KindRunCompleted); n != 1 {
		t.Errorf("%d run.completed, want 1", n)
	}
}

// A mention journaled in a channel nobody holds is journaled by the
// replica that claims the channel first, so its first drive is not a
// resume: its posts are not in doubt (a surface would look each one up on
// the platform first; Slack paces those reads to one a second). A run
// another replica left behind before its first step is resumed, but its
// answer is keyed to the step the new owner journals, which no earlier
// drive can have posted: not in doubt either (under load, 122 of 1,000
// runs taken over from a killed replica waited behind those reads for
// minutes). TestAnswerOfAStepJournaledBeforeTheTakeoverIsInDoubt is the
// other side.
func TestRunJournaledAfterTheClaimIsNotInDoubt(t *testing.T) {
	c := newCluster(t)
	a, _, stuck := c.addStalled()
	mb := coretest.NewScriptedModel(coretest.Text("answer from b"), coretest.Text("answer from b"))
	b := c.add("b", mb, nil)

	// a claims C1 first and journals; it stalls and its lease lapses: b
	// resumes the run, in doubt.
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
	waitFor(t, "b to take the run over and answer", func() bool { return answers(b.s, "answer from b") == 1 })
	close(stuck)
	_ = a.e.WaitIdle(t.Context())
	// A new channel: b claims it before journaling the mention.
	deliverTo(t, b, core.Event{Scope: chanScope("C2"), Visibility: core.Public, MessageID: "M2", Author: alice,
		Text: "<@" + botID + "> and this", MentionsBot: true, At: time.Now()})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%+v\n%s", b.s.Posts(), b.logs.String())
		}
	})
	waitFor(t, "b's answer in C2", func() bool { return answers(b.s, "answer from b") == 2 })
	_ = b.e.WaitIdle(t.Context())
	for _, p := range b.s.Posts() {
		switch {
		case p.Out.Scope.Channel == "C1" && p.Out.Resumed:
			t.Errorf("the answer to a step b journaled is marked resumed (a never stepped): %+v", p.Out)
		case p.Out.Scope.Channel == "C2" && p.Out.Resumed:
			t.Errorf("a post of the run b journaled as the owner is marked resumed: %+v", p.Out)
		}
	}
}

// A replica that journaled its model step and then stalled before the
// post (cut off from the database, its lease lapsing) may have posted the
// answer: the replica that takes the run over posts it as in doubt, so the
// surface first looks for it on the platform.
func TestAnswerOfAStepJournaledBeforeTheTakeoverIsInDoubt(t *testing.T) {
	c := newCluster(t)
	a := c.add("a", coretest.NewScriptedModel(coretest.Text("answer from a")), func(l core.Leases) core.Leases { return renewFails{l} })
	stuck := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(stuck) }) }
	a.s.FailPost = func(out core.Outbound) error {
		if strings.Contains(out.Text, "answer from a") {
			<-stuck
			return errors.New("cut off")
		}
		return nil
	}
	t.Cleanup(release)
	b := takeOverStalled(t, c, a, release, "b to take the run over and post a's answer", "answer from a")
	for _, p := range b.s.Posts() {
		if strings.Contains(p.Out.Text, "answer from a") && !p.Out.Resumed {
			t.Errorf("the answer to a's journaled step is posted as not in doubt: %+v", p.Out)
		}
	}
	if n := answers(b.s, "answer from b"); n != 0 {
		t.Errorf("b asked its own model again (%d answers): a's step was journaled", n)
	}
}

// A run taken over from a replica that died before posting anything is
// older than the checklist delay by then. The new owner times the delay
// from its own drive: a model that answers at once is answered with no
// checklist and nothing in doubt. Timed from the run's start, the
// checklist went up at once, keyed to run.started and so in doubt: each
// was first looked for on the platform (Slack: one read a second for the
// workspace), and a dead replica's channels were answered one a second.
func TestTakenOverRunTimesItsChecklistFromItsOwnDrive(t *testing.T) {
	c := newCluster(t)
	c.checklistDelay = 150 * time.Millisecond
	a := c.add("a", coretest.NewScriptedModel(coretest.Text("answer from a")), func(l core.Leases) core.Leases { return renewFails{l} })
	stuck := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(stuck) }) }
	a.s.FailPost = func(core.Outbound) error { <-stuck; return errors.New("cut off") } // a posts nothing
	t.Cleanup(release)
	ma := a.m
	ma.OnCall = func(ctx context.Context, n int, v core.View) {
		select {
		case <-stuck:
		case <-ctx.Done():
		}
	}
	b := takeOverStalled(t, c, a, release, "b to take the run over and answer", "answer from b")
	for _, p := range b.s.Posts() {
		if p.Out.Resumed {
			t.Errorf("b posted in doubt (it would be looked for on the platform first): %+v", p.Out)
		}
	}
	if n := len(b.s.Posts()); n != 1 {
		t.Errorf("b posted %d messages, want the answer alone: %+v", n, b.s.Posts())
	}
}

// takeOverStalled adds b (its model answers "answer from b"), gives a
// mention in C1 to a, which stalls (its leases cannot be renewed), waits
// until b has posted want, then releases a and lets both go idle.
func takeOverStalled(t *testing.T, c *cluster, a *replica, release func(), what, want string) *replica {
	t.Helper()
	b := c.add("b", coretest.NewScriptedModel(coretest.Text("answer from b")), nil)
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> do it", MentionsBot: true, At: time.Now()})
	waitFor(t, what, func() bool { return answers(b.s, want) == 1 })
	release()
	_ = a.e.WaitIdle(t.Context())
	_ = b.e.WaitIdle(t.Context())
	return b
}
