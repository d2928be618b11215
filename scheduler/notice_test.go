package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// A skipped slot's report is an item of its owner's inbox, filed once
// across restarts, until the owner dismisses it on its DM card.
func TestASkippedSlotIsAReportInTheOwnersInbox(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add 0 9 * * * tz Europe/Paris: morning digest"))
	w.restart()
	w.clk.Set(time.Date(2026, 3, 5, 10, 30, 0, 0, time.UTC))
	w.tick() // the slot is skipped
	w.tick() // and reported
	inbox := func(p core.Person) []core.InboxItem {
		t.Helper()
		items, err := w.e.Inbox(context.Background(), "test", p.ID)
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	items := inbox(alice)
	if len(items) != 1 || items[0].Kind != "report" || !strings.Contains(items[0].Title, "Routine "+id+" skipped its") || items[0].Where != room {
		t.Fatalf("the owner's inbox after the skip = %+v", items)
	}
	if got := inbox(bob); len(got) != 0 {
		t.Errorf("bob's inbox = %+v", got)
	}

	w.restart() // a new process has noticed nothing yet
	w.tick()
	if n, dm := w.count(core.KindReportFiled), w.dms(alice.ID); n != 1 || len(dm) != 1 {
		t.Fatalf("after a restart: %d report.filed, owner's DM %q; want one of each", n, dm)
	}

	var tok string
	for _, p := range w.s.Cards() {
		if p.Out.Scope.Channel == "D-"+alice.ID {
			for _, a := range p.Out.Card.Actions {
				if a.ID == "dismiss" {
					tok = a.Token
				}
			}
		}
	}
	dm := core.Scope{Platform: "test", Workspace: "W1", Channel: "D-" + alice.ID}
	if err := w.e.Deliver(context.Background(), core.Inbound{Click: &core.CardClick{Scope: dm, Token: tok, By: alice, At: w.clk.Now()}}); err != nil {
		t.Fatal(err)
	}
	w.idle()
	if got := inbox(alice); len(got) != 0 {
		t.Errorf("the dismissed report is still listed: %+v", got)
	}
	w.tick()
	if n, dm := w.count(core.KindReportFiled), w.dms(alice.ID); n != 1 || len(dm) != 1 {
		t.Errorf("after the dismissal: %d report.filed, owner's DM %q", n, dm)
	}
}
