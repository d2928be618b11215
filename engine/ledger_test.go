package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// readerFake is the test surface answering who can read which room
// (core.RoomReader), as a platform would.
type readerFake struct {
	*coretest.FakeSurface
	readers map[string][]string
}

func (s readerFake) CanRead(_ context.Context, ch, user string) (bool, error) {
	return slices.Contains(s.readers[ch], user), nil
}

// ATTACK (the ledger hands over other people's notes): Bob keeps a note
// about Alice in his own DM with the bot, and another in a private channel
// Alice is not in. Alice asks `export my data` and `what do you know about
// me`. She gets her own note and Bob's note from a room she can read, and
// only a count of the other two: no text, no author, no room. On the old
// code both of Bob's private notes were in her export, with their text and
// author.
func TestLedgerShowsOnlyNotesFromRoomsThePersonCanRead(t *testing.T) {
	var h *harness
	h = newHarness(t, nil, nil, func(c *engine.Config) {
		c.Surfaces = map[string]core.Surface{platform: readerFake{FakeSurface: c.Surfaces[platform].(*coretest.FakeSurface),
			readers: map[string][]string{"CGEN": {"UALICE", "UBOB"}, "CPRIV": {"UBOB"}}}}
	})
	ctx := context.Background()
	h.deliver(h.inDM(bob, "hi"))
	h.deliver(h.mention(bob, "CPRIV", "hi"))
	h.deliver(h.mention(alice, "CGEN", "hi"))
	h.idle()
	byBob := core.Provenance{Actor: core.Actor{Type: core.ActorHuman, ID: bob.ID}}
	byAlice := core.Provenance{Actor: core.Actor{Type: core.ActorHuman, ID: alice.ID}}
	const (
		bobsDMNote  = "<@UALICE> is interviewing at Globex, keep it quiet"
		privateNote = "<@UALICE> is on the layoff list"
		publicNote  = "<@UALICE> owns the release checklist"
		alicesOwn   = "my standup is at 9:30"
		bobsOtherDM = "buy milk"
	)
	for _, n := range []struct {
		ch   core.Scope
		text string
		prov core.Provenance
	}{
		{dmScope(bob), bobsDMNote, byBob},
		{dmScope(bob), bobsOtherDM, byBob},
		{chanScope("CPRIV"), privateNote, byBob},
		{chanScope("CGEN"), publicNote, byBob},
		{chanScope("CGEN"), alicesOwn, byAlice},
	} {
		if _, err := h.mem.For(n.ch.Key()).Remember(ctx, n.text, n.prov); err != nil {
			t.Fatal(err)
		}
	}

	h.deliver(h.inDM(alice, "export my data"))
	h.idle()
	ups := h.s.Uploads()
	if len(ups) != 1 {
		t.Fatalf("%d uploads, want the export", len(ups))
	}
	raw := string(ups[0].File.Content)
	var exp engine.Export
	if err := json.Unmarshal(ups[0].File.Content, &exp); err != nil {
		t.Fatal(err)
	}
	h.deliver(h.inDM(alice, "what do you know about me"))
	h.idle()
	var about string
	for _, p := range h.s.PostsIn(dmScope(alice).Channel) {
		about += p.Out.Text + "\n"
	}
	for name, out := range map[string]string{"export": raw, "what do you know about me": about} {
		for _, secret := range []string{"Globex", "layoff", "buy milk", "CPRIV", "D-UBOB"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s hands over %q:\n%s", name, secret, out)
			}
		}
		for _, kept := range []string{"release checklist", "standup is at 9:30"} {
			if !strings.Contains(out, kept) {
				t.Errorf("%s lacks %q:\n%s", name, kept, out)
			}
		}
	}
	if exp.WithheldNotes != 2 {
		t.Errorf("withheld_notes = %d, want 2 (Bob's DM note and the private channel's)", exp.WithheldNotes)
	}
	if !strings.Contains(about, "2 more that mention you") {
		t.Errorf("the ledger does not count the withheld notes:\n%s", about)
	}
}
