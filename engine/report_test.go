package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// homeSurface is the fake surface with a home page (Slack's App Home): it
// records every publish.
type homeSurface struct {
	*coretest.FakeSurface
	mu   sync.Mutex
	pubs []homePub
}

type homePub struct {
	user  string
	items []core.InboxItem
}

func (s *homeSurface) PublishHome(_ context.Context, userID string, items []core.InboxItem) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pubs = append(s.pubs, homePub{user: userID, items: items})
	return nil
}

// published returns the home pages published for user, in order.
func (s *homeSurface) published(user string) [][]core.InboxItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]core.InboxItem
	for _, p := range s.pubs {
		if p.user == user {
			out = append(out, p.items)
		}
	}
	return out
}

// withHome restarts h's engine on a surface that has a home page.
func withHome(h *harness) *homeSurface {
	hs := &homeSurface{FakeSurface: h.s}
	h.cfg.Surfaces = map[string]core.Surface{platform: hs}
	h.restart()
	return hs
}

// skipNotice is the report the scheduler files when a slot of alice's
// routine in C1 was skipped.
func skipNotice(h *harness, n int) core.OwnerNotice {
	return core.OwnerNotice{Where: chanScope("C1"), Owner: alice.ID, Key: fmt.Sprintf("routine-skipped:%d", n), Cause: h.b.NewID(),
		Title: fmt.Sprintf("⏭️ Routine r%d skipped its slot", n), Body: "Nothing was posted for this slot: the budget is used up.",
		Fields: []core.CardField{{Label: "Missed", Value: "1 slot(s)"}}}
}

func notifyOwner(t *testing.T, e *engine.Engine, n core.OwnerNotice) {
	t.Helper()
	if err := e.NotifyOwner(context.Background(), n); err != nil {
		t.Fatalf("notify owner: %v", err)
	}
}

func inboxOf(t *testing.T, e *engine.Engine, p core.Person) []core.InboxItem {
	t.Helper()
	items, err := e.Inbox(context.Background(), platform, p.ID)
	if err != nil {
		t.Fatalf("inbox of %s: %v", p.ID, err)
	}
	return items
}

// reportCard is the DM card of report key in alice's DM.
func reportCard(t *testing.T, h *harness, key string) coretest.Post {
	t.Helper()
	var found []coretest.Post
	for _, p := range dmCards(h, alice) {
		if p.Out.Key == key {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("cards of report %s in alice's DM: %d, want 1", key, len(found))
	}
	return found[0]
}

func whispered(h *harness, p core.Person, substr string) bool {
	for _, w := range h.s.Whispers() {
		if w.User == p.ID && strings.Contains(w.Text, substr) {
			return true
		}
	}
	return false
}

func TestRoutineReportIsAnInboxItemOfItsOwnerOnly(t *testing.T) {
	h := newHarness(t, nil, nil)
	n := skipNotice(h, 1)
	notifyOwner(t, h.e, n)

	items := inboxOf(t, h.e, alice)
	if len(items) != 1 || items[0].Kind != "report" || items[0].ID != n.Key || items[0].Title != n.Title || items[0].Where != n.Where {
		t.Fatalf("alice's inbox = %+v", items)
	}
	if got := inboxOf(t, h.e, bob); len(got) != 0 {
		t.Errorf("bob's inbox holds alice's report: %+v", got)
	}
	if c := reportCard(t, h, n.Key).Out.Card; token(c, "dismiss") == "" {
		t.Errorf("the report's card has no Dismiss button: %+v", c)
	}
	if got := payloads[*core.ReportFiled](h, "C1", core.KindReportFiled); len(got) != 1 || got[0].ReportID != n.Key || got[0].Owner != alice.ID {
		t.Errorf("report.filed in the routine's channel = %+v", got)
	}

	// `inbox` lists it, and a restart folds the same inbox.
	h.restart()
	h.deliver(h.inDM(alice, "inbox"))
	h.idle()
	var listed bool
	for _, p := range h.s.PostsIn("D-" + alice.ID) {
		listed = listed || strings.Contains(p.Out.Text, "Your inbox — 1 waiting") && strings.Contains(p.Out.Text, "📋 "+n.Title+" — in <#C1>; filed Mar 2 09:00 UTC")
	}
	if !listed {
		t.Fatalf("`inbox` does not list the report: %+v", h.s.PostsIn("D-"+alice.ID))
	}
}

// A retry after a failed post, and a second replica on the same journal
// (folded before the report existed), file one report and post one card.
func TestRoutineReportIsFiledOnceAndPostedOnce(t *testing.T) {
	h := newHarness(t, nil, nil)
	replica, err := engine.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Close() })
	h.deliver(h.mention(bob, "C1", "hello"))
	h.idle()
	_ = inboxOf(t, replica, alice) // the replica's view of C1 is folded now, before the report

	n := skipNotice(h, 1)
	h.s.FailPost = func(out core.Outbound) error {
		if out.Key == n.Key {
			return errors.New("platform down")
		}
		return nil
	}
	if err := h.e.NotifyOwner(context.Background(), n); err == nil {
		t.Fatal("a failed card post was not reported to the caller (who retries)")
	}
	// Journaled before the post: the report waits in the inbox all the same.
	if items := inboxOf(t, h.e, alice); len(items) != 1 || items[0].Kind != "report" {
		t.Fatalf("after a failed post, alice's inbox = %+v", items)
	}
	h.s.FailPost = nil

	notifyOwner(t, replica, n) // the retry, on the other replica
	notifyOwner(t, h.e, n)     // and again on the first
	if got := h.count("C1", core.KindReportFiled); got != 1 {
		t.Errorf("report.filed journaled %d times, want 1", got)
	}
	_ = reportCard(t, h, n.Key)
	if got := h.s.Attempts(n.Key); got != 2 {
		t.Errorf("the card was attempted %d times, want 2 (the failed one and the retry)", got)
	}
	for _, e := range []*engine.Engine{h.e, replica} {
		if items := inboxOf(t, e, alice); len(items) != 1 {
			t.Errorf("alice's inbox = %+v, want the one report", items)
		}
	}
}

func TestOwnerDismissesAReport(t *testing.T) {
	h := newHarness(t, nil, nil)
	hs := withHome(h)
	n := skipNotice(h, 1)
	notifyOwner(t, h.e, n)
	if pubs := hs.published(alice.ID); len(pubs) != 1 || len(pubs[0]) != 1 || pubs[0][0].Kind != "report" {
		t.Fatalf("alice's home pages after the report = %+v", pubs)
	}
	card := reportCard(t, h, n.Key)

	h.clk.Advance(time.Hour)
	h.click(alice, token(card.Out.Card, "dismiss"), dmScope(alice))
	h.idle()

	if items := inboxOf(t, h.e, alice); len(items) != 0 {
		t.Errorf("a dismissed report stays in the inbox: %+v", items)
	}
	got := payloads[*core.ReportDismissed](h, "C1", core.KindReportDismissed)
	if len(got) != 1 || got[0].ReportID != n.Key || got[0].By.ID != alice.ID {
		t.Errorf("report.dismissed = %+v", got)
	}
	cur := current(t, h, card)
	if want := "Dismissed by <@UALICE> at 2026-03-02 10:00 UTC"; !strings.Contains(cur.Resolution, want) || len(cur.Actions) != 0 {
		t.Errorf("the DM card after dismissal = %+v, want %q and no buttons", cur, want)
	}
	if cur.Title != n.Title {
		t.Errorf("the edited card lost its title: %q", cur.Title)
	}
	var edits int
	for _, e := range h.s.Edits() {
		if e.Ref.ID == card.Ref.ID {
			edits++
		}
	}
	if edits != 1 || len(dmCards(h, alice)) != 1 {
		t.Errorf("card edits %d, DM cards %d: want the one card edited in place once", edits, len(dmCards(h, alice)))
	}
	if pubs := hs.published(alice.ID); len(pubs) != 2 || len(pubs[1]) != 0 {
		t.Errorf("alice's home pages = %+v, want a second, empty one after the dismissal", pubs)
	}
}

func TestOnlyTheOwnerDismissesAReport(t *testing.T) {
	h := newHarness(t, nil, nil)
	n := skipNotice(h, 1)
	notifyOwner(t, h.e, n)
	card := reportCard(t, h, n.Key)

	h.click(bob, token(card.Out.Card, "dismiss"), dmScope(bob)) // a forwarded card
	h.idle()

	if !whispered(h, bob, "only <@UALICE>") {
		t.Errorf("bob was not told why: %+v", h.s.Whispers())
	}
	if whispered(h, alice, "") {
		t.Errorf("the refusal reached alice: %+v", h.s.Whispers())
	}
	if got := h.count("C1", core.KindReportDismissed); got != 0 {
		t.Errorf("bob's click dismissed the report (%d report.dismissed)", got)
	}
	if items := inboxOf(t, h.e, alice); len(items) != 1 {
		t.Errorf("alice's inbox after bob's click = %+v", items)
	}
	if c := current(t, h, card); c.Resolution != "" || token(c, "dismiss") == "" {
		t.Errorf("the card changed: %+v", c)
	}
}

// A replayed click (or a click on a second rendering) after the dismissal
// is refused as already dismissed, and nothing changes.
func TestASecondDismissalIsRefused(t *testing.T) {
	h := newHarness(t, nil, nil)
	hs := withHome(h)
	n := skipNotice(h, 1)
	notifyOwner(t, h.e, n)
	card := reportCard(t, h, n.Key)
	tok := token(card.Out.Card, "dismiss")
	h.click(alice, tok, dmScope(alice))
	h.idle()
	edits, pubs := len(h.s.Edits()), len(hs.published(alice.ID))

	h.restart() // a replayed delivery may reach a fresh process
	h.click(alice, tok, dmScope(alice))
	h.idle()

	if !whispered(h, alice, "already dismissed by <@UALICE>") {
		t.Errorf("the second dismissal was not refused visibly: %+v", h.s.Whispers())
	}
	if got := h.count("C1", core.KindReportDismissed); got != 1 {
		t.Errorf("report.dismissed journaled %d times, want 1", got)
	}
	if got := len(h.s.Edits()); got != edits {
		t.Errorf("the card was edited again (%d edits, want %d)", got, edits)
	}
	if got := len(hs.published(alice.ID)); got != pubs {
		t.Errorf("the home page was published again (%d, want %d)", got, pubs)
	}
	if items := inboxOf(t, h.e, alice); len(items) != 0 {
		t.Errorf("alice's inbox = %+v", items)
	}
}

func TestReportsLeaveTheInboxAfterAWeek(t *testing.T) {
	h := newHarness(t, nil, nil)
	notifyOwner(t, h.e, skipNotice(h, 1))
	h.clk.Advance(6 * 24 * time.Hour)
	if items := inboxOf(t, h.e, alice); len(items) != 1 {
		t.Fatalf("a six-day-old report is not listed: %+v", items)
	}
	h.clk.Advance(24*time.Hour + time.Minute)
	if items := inboxOf(t, h.e, alice); len(items) != 0 {
		t.Errorf("a report older than 7 days is listed: %+v", items)
	}
}

func TestTheInboxListsAtMostFiftyReports(t *testing.T) {
	h := newHarness(t, nil, nil)
	for i := range 53 {
		notifyOwner(t, h.e, skipNotice(h, i))
		h.clk.Advance(time.Minute)
	}
	items := inboxOf(t, h.e, alice)
	if len(items) != 50 {
		t.Fatalf("alice's inbox lists %d reports, want 50", len(items))
	}
	if items[0].ID != "routine-skipped:3" || items[49].ID != "routine-skipped:52" {
		t.Errorf("listed %s … %s, want the newest 50 (3 … 52), oldest first", items[0].ID, items[49].ID)
	}
}
