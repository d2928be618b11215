package journaltest

import (
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// tailJournal writes a journal that exercises every branch of the tail
// reads and returns the ids of what each must (and must not) return.
type tailJournal struct {
	t0       time.Time
	open     []string // ids Unfinished must return
	finished []string // ids it must not
	posts    []string // ids PostsSince(t0+10m) must return
	old      []string // ids it must not
	policies []string // every policy.changed
	owed     []string // failed runs that owe no notice: a store may return them or not
}

func writeTail(t *testing.T, f *fixture) tailJournal {
	var tj tailJournal
	tj.t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := tj.t0
	bd := core.NewBoundary(func() time.Time { return now })
	ann := core.Person{ID: "U1", Name: "Ann"}
	ids := func(cmds []core.Command) []string {
		out := make([]string, len(cmds))
		for i, c := range cmds {
			out[i] = c.ID()
		}
		return out
	}
	agent := func(run, ch string, p core.Payload) core.Draft {
		t.Helper()
		d, err := bd.Agent(run, scope(ch), core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	received := func(run, ch, id string) core.Draft {
		t.Helper()
		d, err := bd.Human(ann, scope(ch), core.Meta{Run: run},
			&core.MessageReceived{MessageID: id, Author: ann, Visibility: core.Public, Text: "hi " + id, Reason: "mention"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	posted := func(run, ch, effect string) core.Draft {
		t.Helper()
		p := &core.MessagePosted{EffectID: effect, MessageID: "P-" + effect, Role: core.RoleNotice, Text: "notice"}
		if run != "" {
			return agent(run, ch, p)
		}
		d, err := bd.System("engine", scope(ch), core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	started := func(run, ch string) core.Draft { return agent(run, ch, &core.RunStarted{Trigger: "M-" + run}) }
	approval := func(run, ch, id string) core.Draft {
		return agent(run, ch, &core.ApprovalRequested{ApprovalID: id, Tool: "t", Consequence: "write", ExpiresAt: tj.t0.Add(time.Hour)})
	}
	resolved := func(run, ch, id string) core.Draft {
		return agent(run, ch, &core.ApprovalResolved{ApprovalID: id, Decision: "approved"})
	}
	policy := func(ch string) core.Draft {
		t.Helper()
		d, err := bd.Human(ann, scope(ch), core.Meta{}, &core.PolicyChanged{Policy: core.Policy{ThreadWindowS: 3600}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// a: a finished run, then one working and waiting for an approval.
	done := f.append(received("r1", "a", "M1"), started("r1", "a"), stepDraft(t, bd, "r1", scope("a"), 1),
		posted("r1", "a", "e1"), agent("r1", "a", &core.RunCompleted{}))
	tj.finished = append(tj.finished, ids(done)...)
	live := f.append(received("r2", "a", "M2"), started("r2", "a"))
	tj.finished = append(tj.finished, live[0].ID())
	tj.open = append(tj.open, live[1].ID())
	ap := f.append(approval("r2", "a", "ap1"))
	tj.open = append(tj.open, ap[0].ID())

	// b: failed runs, with the posts that follow the failure (not before).
	b1 := f.append(started("r3", "b"), posted("r3", "b", "before"))
	tj.finished = append(tj.finished, b1[1].ID())
	tj.open = append(tj.open, b1[0].ID()) // until it fails below
	b2 := f.append(agent("r3", "b", &core.RunFailed{Status: core.RunBroken, Cause: "boom"}),
		posted("r3", "b", "checklist"), posted("r3", "b", "notice"))
	tj.open = append(tj.open, b2[0].ID()) // its posts are not its end notice; a store may return them
	tj.open = slices.DeleteFunc(tj.open, func(id string) bool { return id == b1[0].ID() })
	tj.finished = append(tj.finished, b1[0].ID())

	// b: failed runs that owe nothing: the end notice posted under its key,
	// and a run superseded by a new message (no notice due). A store may
	// return them (core settles them), and must not return the run.started.
	b3 := f.append(started("r10", "b"), agent("r10", "b", &core.RunFailed{Status: core.RunCancelled, Cause: "stopped by Ann"}))
	b4 := f.append(posted("r10", "b", core.EffectID(key("b"), b3[1].Seq(), 0)))
	b5 := f.append(started("r11", "b"), agent("r11", "b", &core.RunFailed{Status: core.RunCancelled, Cause: "superseded by a new message in the thread"}))
	tj.finished = append(tj.finished, b3[0].ID(), b5[0].ID())
	tj.owed = append(tj.owed, b3[1].ID(), b4[0].ID(), b5[1].ID())

	// c: a terminal run that left one of two approvals pending.
	c := f.append(started("r5", "c"), approval("r5", "c", "ap2"), approval("r5", "c", "ap3"),
		resolved("r5", "c", "ap2"), agent("r5", "c", &core.RunFailed{Status: core.RunCancelled, Cause: "superseded"}))
	tj.finished = append(tj.finished, c[0].ID(), c[3].ID())
	tj.open = append(tj.open, c[1].ID(), c[2].ID(), c[4].ID())
	// c: all approvals resolved: none returned.
	c2 := f.append(started("r8", "c"), approval("r8", "c", "ap4"), resolved("r8", "c", "ap4"), agent("r8", "c", &core.RunCompleted{}))
	tj.finished = append(tj.finished, ids(c2)...)

	// d: a run whose completion was redacted is, to the folds, not ended.
	d := f.append(started("r6", "d"), agent("r6", "d", &core.RunCompleted{}))
	rec, err := bd.System("operator", scope("d"), core.Meta{}, &core.CommandRedacted{Seq: d[1].Seq(), ID: d[1].ID(), Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.j.Redact(t.Context(), d[1].Seq(), rec); err != nil {
		t.Fatalf("redact: %v", err)
	}
	tj.open = append(tj.open, d[0].ID())
	tj.finished = append(tj.finished, d[1].ID())

	// e, f: posts over time, policies, a post's run's messages.
	pe := f.append(policy("e"), posted("", "e", "old"))
	tj.policies = append(tj.policies, pe[0].ID())
	tj.old = append(tj.old, pe[1].ID())
	pf := f.append(policy("f"), received("r9", "f", "M9"))
	tj.policies = append(tj.policies, pf[0].ID())
	tj.old = append(tj.old, ids(pf)...) // f has no recent post
	now = tj.t0.Add(10 * time.Minute)
	re := f.append(received("r7", "e", "M7"), received("", "e", "M-other"), started("r7", "e"))
	tj.old = append(tj.old, re[1].ID(), re[2].ID())
	pr := f.append(posted("r7", "e", "recent"))
	tj.posts = append(tj.posts, pe[0].ID(), re[0].ID(), pr[0].ID())
	now = tj.t0.Add(30 * time.Minute)
	tj.posts = append(tj.posts, f.append(posted("", "e", "later"))[0].ID())
	tj.old = append(tj.old, f.append(policy("f"))[0].ID())
	tj.policies = append(tj.policies, tj.old[len(tj.old)-1])
	tj.finished = append(tj.finished, pr[0].ID())
	return tj
}

// everything reads the whole journal in (channel, seq) order.
func (f *fixture) everything() []core.Command {
	f.t.Helper()
	chs, err := f.j.Channels(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	var all []core.Command
	for _, ch := range chs {
		all = append(all, f.read(ch, 1, 0)...)
	}
	return all
}

func checkTail(t *testing.T, what string, got, want []core.Command, must, mustNot []string) {
	t.Helper()
	sameCommands(t, got, want)
	checkHas(t, what, got, must, mustNot)
}

// checkSubset checks got is an ordered subset of want (what a store may
// leave out of the widest answer) and holds must but not mustNot.
func checkSubset(t *testing.T, what string, got, want []core.Command, must, mustNot []string) {
	t.Helper()
	i := 0
	for _, c := range got {
		for i < len(want) && want[i].ID() != c.ID() {
			i++
		}
		if i == len(want) {
			t.Errorf("%s: returned %s %s, not in the reference (or out of order)", what, c.Kind(), c.ID())
			return
		}
		sameCommand(t, c, want[i])
	}
	checkHas(t, what, got, must, mustNot)
}

func checkHas(t *testing.T, what string, got []core.Command, must, mustNot []string) {
	t.Helper()
	has := map[string]bool{}
	for _, c := range got {
		has[c.ID()] = true
	}
	for _, id := range must {
		if !has[id] {
			t.Errorf("%s: missing %s", what, id)
		}
	}
	for _, id := range mustNot {
		if has[id] {
			t.Errorf("%s: returned %s, which it must not", what, id)
		}
	}
}

// testTail: the tail reads return what the reference filters over the
// whole journal return, and those hold what start-up needs.
func testTail(t *testing.T, f *fixture) {
	ctx := t.Context()
	for _, read := range []struct {
		name string
		fn   func() ([]core.Command, error)
	}{
		{"Unfinished", func() ([]core.Command, error) { return f.j.Unfinished(ctx) }},
		{"Policies", func() ([]core.Command, error) { return f.j.Policies(ctx) }},
		{"PostsSince", func() ([]core.Command, error) { return f.j.PostsSince(ctx, time.Now()) }},
	} {
		if got, err := read.fn(); err != nil || len(got) != 0 {
			t.Fatalf("%s of an empty journal: %d %v", read.name, len(got), err)
		}
	}
	tj := writeTail(t, f)
	all := f.everything()

	got, err := f.j.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSubset(t, "Unfinished", got, Unfinished(all), tj.open, tj.finished)

	got, err = f.j.Policies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkTail(t, "Policies", got, Policies(all), tj.policies, nil)
	if len(got) != len(tj.policies) {
		t.Errorf("Policies: %d commands, want %d", len(got), len(tj.policies))
	}

	since := tj.t0.Add(10 * time.Minute)
	got, err = f.j.PostsSince(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	checkTail(t, "PostsSince", got, PostsSince(all, since), tj.posts, tj.old)
	// "At or after" to the microsecond commands are stored at.
	got, err = f.j.PostsSince(ctx, since.Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	checkTail(t, "PostsSince(+1ns)", got, PostsSince(all, since.Add(time.Nanosecond)), tj.posts[len(tj.posts)-1:], tj.posts[1:3])
}

// testItemChannels: ItemChannels lists, in order, the channels of a
// platform holding an approval.requested, consent.granted or report.filed
// that is not redacted, as the reference over the whole journal does, and
// none of another platform or with only other commands.
func testItemChannels(t *testing.T, f *fixture) {
	ctx := t.Context()
	if got, err := f.j.ItemChannels(ctx, "test"); err != nil || len(got) != 0 {
		t.Fatalf("ItemChannels of an empty journal: %v %v", got, err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	bd := core.NewBoundary(func() time.Time { return now })
	ann := core.Person{ID: "U1", Name: "Ann"}
	draft := func(sc core.Scope, p core.Payload) core.Draft {
		t.Helper()
		d, err := bd.Agent("run-"+sc.Channel, sc, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	other := core.Scope{Platform: "other", Workspace: "w", Channel: "c-approval"}
	f.append(f.msgs("c-chatter", 3)...)
	f.append(draft(scope("c-approval"), &core.ApprovalRequested{ApprovalID: "a1", Tool: "t", Consequence: "write", ExpiresAt: now.Add(time.Hour)}))
	f.append(draft(scope("c-approval"), &core.ApprovalResolved{ApprovalID: "a1", Decision: "approved"}))
	f.append(draft(scope("b-grant"), &core.ConsentGranted{ConsentID: "g1", Tool: "t", Owner: ann.ID}))
	f.append(draft(scope("d-report"), &core.ReportFiled{ReportID: "rp1", Owner: ann.ID, Title: "report"}))
	f.append(draft(other, &core.ApprovalRequested{ApprovalID: "a2", Tool: "t", Consequence: "write", ExpiresAt: now.Add(time.Hour)}))
	gone := f.append(draft(scope("e-redacted"), &core.ApprovalRequested{ApprovalID: "a3", Tool: "t", Consequence: "write", ExpiresAt: now.Add(time.Hour)}))[0]
	rec, err := bd.System("engine", scope("e-redacted"), core.Meta{}, &core.CommandRedacted{Seq: gone.Seq(), ID: gone.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.j.Redact(ctx, gone.Seq(), rec); err != nil {
		t.Fatal(err)
	}
	got, err := f.j.ItemChannels(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ChannelKey{key("b-grant"), key("c-approval"), key("d-report")}
	if !slices.Equal(got, want) {
		t.Fatalf("ItemChannels(test) = %v, want %v", got, want)
	}
	if ref := ItemChannels(f.everything(), "test"); !slices.Equal(ref, want) {
		t.Fatalf("the reference gives %v, want %v", ref, want)
	}
	if got, err := f.j.ItemChannels(ctx, "other"); err != nil || !slices.Equal(got, []core.ChannelKey{other.Key()}) {
		t.Fatalf("ItemChannels(other) = %v %v", got, err)
	}
}
