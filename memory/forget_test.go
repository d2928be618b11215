package memory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/memory"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// forgetRig is the real engine over the real memory service on a real
// SQLite store (journal and memory index in one file), a fake surface, and
// UOPS as the platform's operator.
type forgetRig struct {
	t       *testing.T
	path    string
	store   *sqlite.Store
	signer  *core.Signer
	b       *core.Boundary
	svc     *memory.Service
	e       *engine.Engine
	surface *coretest.FakeSurface
	n       int
}

func newForgetRig(t *testing.T) *forgetRig {
	t.Helper()
	signer := coretest.NewSigner(t)
	path := filepath.Join(t.TempDir(), "marlowe.db")
	st, err := sqlite.Open(t.Context(), path, signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := core.NewBoundary(nil)
	svc, e, surface := startChatEngine(t, st, b, sqlite.NewMemoryIndex(st), []core.Operator{{Platform: "test", UserID: "UOPS"}})
	return &forgetRig{t: t, path: path, store: st, signer: signer, b: b, svc: svc, e: e, surface: surface}
}

func (r *forgetRig) idle() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.e.WaitIdle(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// say delivers who's message in channel ch (a DM when ch starts with "D")
// and returns the bot's last post there.
func (r *forgetRig) say(ch, who, text string) string {
	r.t.Helper()
	r.n++
	msg := fmt.Sprintf("M%03d", r.n)
	vis := core.Public
	if strings.HasPrefix(ch, "D") {
		vis = core.DM
	}
	ev := core.Event{Scope: core.Scope{Platform: "test", Workspace: "W", Channel: ch}, Visibility: vis,
		MessageID: msg, Author: core.Person{ID: who}, Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
	if err := r.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		r.t.Fatal(err)
	}
	r.idle()
	return r.last(ch, msg)
}

func (r *forgetRig) last(ch, thread string) string {
	var last string
	for _, p := range r.surface.Posts() {
		if p.Ref.Scope.Channel == ch && (p.Ref.Scope.Thread == thread || strings.HasPrefix(ch, "D")) {
			last = p.Out.Text
		}
	}
	return last
}

// card returns the newest forget card posted in ch.
func (r *forgetRig) card(ch string) *core.Card {
	r.t.Helper()
	var c *core.Card
	for _, p := range r.surface.Cards() {
		if p.Ref.Scope.Channel == ch && strings.HasPrefix(p.Out.Card.ID, "forget-") {
			c = p.Out.Card
		}
	}
	if c == nil {
		r.t.Fatalf("no forget card in %s", ch)
	}
	return c
}

// click delivers who's click on action of card, from channel ch.
func (r *forgetRig) click(ch, who string, card *core.Card, action string) string {
	r.t.Helper()
	var tok string
	for _, a := range card.Actions {
		if a.ID == action {
			tok = a.Token
		}
	}
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: ch}
	before, wbefore := len(r.surface.Posts()), len(r.surface.Whispers())
	if err := r.e.Deliver(context.Background(), core.Inbound{Click: &core.CardClick{Scope: sc, Card: card.ID, Action: action, Token: tok,
		By: core.Person{ID: who}, At: time.Now()}}); err != nil {
		r.t.Fatal(err)
	}
	r.idle()
	var out []string
	for _, p := range r.surface.Posts()[before:] {
		out = append(out, p.Out.Text)
	}
	for _, w := range r.surface.Whispers()[wbefore:] {
		if w.User == who {
			out = append(out, w.Text)
		}
	}
	return strings.Join(out, "\n")
}

// checkDecided asserts the newest forget card in ch now shows want and
// no buttons.
func (r *forgetRig) checkDecided(ch, want string) {
	r.t.Helper()
	for _, p := range r.surface.Cards() {
		if p.Ref.Scope.Channel != ch || !strings.HasPrefix(p.Out.Card.ID, "forget-") {
			continue
		}
		cur, ok := r.surface.Current(p.Ref.ID)
		if !ok || cur.Card == nil || len(cur.Card.Actions) != 0 || !strings.Contains(cur.Card.Resolution, want) {
			r.t.Errorf("the forget card after the decision: %+v, want %q and no buttons", cur.Card, want)
		}
	}
}

// holding lists, for every channel, the commands whose payload holds any of
// words (case aside).
func (r *forgetRig) holding(words ...string) []string {
	r.t.Helper()
	chs, err := r.store.Channels(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, ch := range chs {
		cmds, err := r.store.Read(r.t.Context(), ch, 1, 100000)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, c := range cmds {
			p := strings.ToLower(string(c.RawPayload()))
			for _, w := range words {
				if strings.Contains(p, strings.ToLower(w)) {
					out = append(out, fmt.Sprintf("%s seq %d %s holds %q", ch, c.Seq(), c.Kind(), w))
				}
			}
		}
	}
	return out
}

// sqlHolding lists the rows of any table of the database file holding any
// of words: the journal, the memory index, its full-text index and vectors.
func (r *forgetRig) sqlHolding(words ...string) []string {
	r.t.Helper()
	db, err := sql.Open("sqlite", "file:"+r.path+"?mode=ro")
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		r.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			r.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var out []string
	for _, tbl := range tables {
		rs, err := db.Query(`SELECT * FROM "` + tbl + `"`)
		if err != nil {
			r.t.Fatalf("scan %s: %v", tbl, err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				r.t.Fatal(err)
			}
			for i, v := range vals {
				var s string
				switch x := v.(type) {
				case string:
					s = x
				case []byte:
					s = string(x)
				}
				for _, w := range words {
					if strings.Contains(strings.ToLower(s), strings.ToLower(w)) {
						out = append(out, fmt.Sprintf("table %s column %s holds %q", tbl, cols[i], w))
					}
				}
			}
		}
		rs.Close()
	}
	return out
}

func (r *forgetRig) verify() {
	r.t.Helper()
	chs, err := r.store.Channels(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ch := range chs {
		if _, err := core.VerifyChannel(r.t.Context(), r.store, r.signer.Verifier(), ch); err != nil {
			r.t.Errorf("verify %s: %v", ch, err)
		}
	}
}

func (r *forgetRig) count(kind core.Kind, actor string) int {
	chs, _ := r.store.Channels(r.t.Context())
	n := 0
	for _, ch := range chs {
		cmds, _ := r.store.Read(r.t.Context(), ch, 1, 100000)
		for _, c := range cmds {
			if c.Kind() == kind && (actor == "" || c.Actor().ID == actor) {
				n++
			}
		}
	}
	return n
}

// `forget me` end to end, on SQLite: Alice's notes and messages in three
// channels, a consent of hers, Bob's note beside them. Her `forget me` in
// her DM shows a card; Bob clicking it, and Bob's `forget <@UALICE>`, erase
// nothing; her click erases every payload holding her texts (checked in the
// journal and with SQL over every table), revokes her consent, keeps Bob's
// note, and the chains verify; the reply counts per channel and kind and
// says what remains; a replayed click does nothing more. Then the operator
// forgets Bob with `forget <@UBOB>`, journaled in the operator's name.
func TestEngineForgetMe(t *testing.T) {
	r := newForgetRig(t)
	alice := []string{"vault code", "7731", "pelican dashboard", "ostrich launch", "quokka migration"}
	r.say("C1", "UALICE", "remember the vault code is zebrafjord 7731")
	r.say("C2", "UALICE", "remember Alice prefers the pelican dashboard")
	r.say("C3", "UALICE", "remember the ostrich launch is on friday")
	r.say("C3", "UALICE", "how is the quokka migration going")
	r.say("C1", "UBOB", "remember the coffee machine is broken")
	r.say("C1", "UBOB", "recall zebrafjord")                              // Bob's query: his words, kept (the note it recalls is hers)
	r.say("C2", "UBOB", "did you see: how is the quokka migration going") // Bob quoting Alice: his, kept and counted
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: "C2"}
	gd, err := r.b.Human(core.Person{ID: "UALICE"}, sc, core.Meta{}, &core.ConsentGranted{ConsentID: "c-alice", Tool: "post_message", Destination: "C2", Owner: "UALICE", Covers: core.CoversChannel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Append(t.Context(), gd); err != nil {
		t.Fatal(err)
	}
	if got := r.holding(alice...); len(got) < 8 {
		t.Fatalf("the scenario keeps too little of Alice's texts to test: %v", got)
	}

	// Outside the DM: nothing, no card.
	if got := r.say("C1", "UALICE", "forget me"); !strings.Contains(got, "only in a direct message") {
		t.Errorf("forget me in a channel answered %q", got)
	}
	got := r.say("DALICE", "UALICE", "forget me")
	if !strings.Contains(got, "Nothing is erased until you click Erase") {
		t.Errorf("forget me answered %q", got)
	}
	card := r.card("DALICE")

	// Attacks: Bob clicks Alice's card (from her DM's scope, and from his
	// own); Bob asks to forget Alice.
	if got := r.click("DALICE", "UBOB", card, "erase"); !strings.Contains(got, "Only <@UALICE>, who asked, can confirm") {
		t.Errorf("Bob's click answered %q", got)
	}
	if got := r.click("DBOB", "UBOB", card, "erase"); !strings.Contains(got, "can't find the request") {
		t.Errorf("Bob's click from his DM answered %q", got)
	}
	if got := r.say("DBOB", "UBOB", "forget <@UALICE>"); !strings.Contains(got, "Only an operator") {
		t.Errorf("Bob's forget <@UALICE> answered %q", got)
	}
	for _, c := range r.surface.Cards() {
		if c.Ref.Scope.Channel == "DBOB" {
			t.Errorf("Bob got a card: %+v", c.Out.Card)
		}
	}
	if r.count(core.KindCommandRedacted, "") != 0 || r.count(core.KindErasureResolved, "") != 0 {
		t.Fatalf("something was erased or resolved before Alice confirmed")
	}

	reply := r.click("DALICE", "UALICE", card, "erase")
	for _, want := range []string{"Erased your messages and notes", "<#C1>: ", "<#C2>: ", "<#C3>: ", " message",
		"1 memory erased", "1 consent revoked", "What remains", "redaction markers", "messages by other people"} {
		if !strings.Contains(reply, want) {
			t.Errorf("the reply lacks %q:\n%s", want, reply)
		}
	}
	// Plain words, not the journal's kinds.
	for _, internal := range []string{"message.received", "command.redacted", "model.step", "memory.written"} {
		if strings.Contains(reply, internal) {
			t.Errorf("the reply shows the journal kind %q:\n%s", internal, reply)
		}
	}
	if got := r.holding(alice...); len(got) != 1 || !strings.Contains(got[0], "message.received holds \"quokka migration\"") {
		t.Errorf("after forget me, payloads still hold Alice's texts:\n%s", strings.Join(got, "\n"))
	}
	// Bob's own messages are his: kept, and the one quoting her is counted.
	if got := r.holding("recall zebrafjord", "did you see"); len(got) != 2 {
		t.Errorf("Bob's messages: %v", got)
	}
	if got := r.sqlHolding("vault code", "pelican", "ostrich", "zebrafjord 7731"); len(got) > 0 {
		t.Errorf("after forget me, rows still hold Alice's texts:\n%s", strings.Join(got, "\n"))
	}
	if got := r.holding("coffee machine"); len(got) == 0 {
		t.Errorf("Bob's note was erased too")
	}
	if n := r.count(core.KindConsentRevoked, "UALICE"); n != 1 {
		t.Errorf("consent.revoked by Alice: %d", n)
	}
	markers := r.count(core.KindCommandRedacted, "UALICE")
	if markers < 10 || markers != r.count(core.KindCommandRedacted, "") {
		t.Errorf("command.redacted: %d by Alice of %d", markers, r.count(core.KindCommandRedacted, ""))
	}
	r.verify()

	// The card is decided in place, as an approval card is: no buttons.
	r.checkDecided("DALICE", "Erase confirmed by <@UALICE>")

	// A replayed click (and the Cancel button after it) does nothing more,
	// and says so to the clicker only.
	posts := len(r.surface.Posts())
	if got := r.click("DALICE", "UALICE", card, "erase"); !strings.Contains(got, "already confirmed") {
		t.Errorf("replayed click answered %q", got)
	}
	if n := len(r.surface.Posts()); n != posts {
		t.Errorf("a replayed click was answered in the open: %v", r.surface.Posts()[posts:])
	}
	if got := r.click("DALICE", "UALICE", card, "cancel"); !strings.Contains(got, "already confirmed") {
		t.Errorf("cancel after confirm answered %q", got)
	}
	if n := r.count(core.KindCommandRedacted, ""); n != markers {
		t.Errorf("a replayed click redacted more: %d, was %d", n, markers)
	}

	// The operator forgets Bob: the card is the operator's to confirm,
	// and every redaction is in the operator's name.
	if got := r.say("DOPS", "UOPS", "forget <@UBOB>"); !strings.Contains(got, "Nothing is erased until you click Erase") {
		t.Fatalf("operator's forget <@UBOB> answered %q", got)
	}
	ocard := r.card("DOPS")
	if !strings.Contains(ocard.Title, "<@UBOB>'s") {
		t.Errorf("operator's card: %q", ocard.Title)
	}
	if got := r.click("DOPS", "UBOB", ocard, "erase"); !strings.Contains(got, "Only <@UOPS>") {
		t.Errorf("Bob confirming the operator's card answered %q", got)
	}
	if got := r.click("DOPS", "UOPS", ocard, "erase"); !strings.Contains(got, "Erased <@UBOB>'s messages and notes") {
		t.Errorf("operator's confirmation answered %q", got)
	}
	if got := r.holding("coffee machine", "recall zebrafjord", "did you see"); len(got) > 0 {
		t.Errorf("after forget <@UBOB>, payloads still hold Bob's texts:\n%s", strings.Join(got, "\n"))
	}
	if n := r.count(core.KindCommandRedacted, "UOPS"); n == 0 || n+markers != r.count(core.KindCommandRedacted, "") {
		t.Errorf("operator's redactions: %d of %d", n, r.count(core.KindCommandRedacted, "")-markers)
	}
	r.verify()
}

// Cancel erases nothing, and the card cannot be confirmed afterwards.
func TestEngineForgetCancel(t *testing.T) {
	r := newForgetRig(t)
	r.say("C1", "UALICE", "remember the vault code is zebrafjord 7731")
	r.say("DALICE", "UALICE", "forget me")
	card := r.card("DALICE")
	if got := r.click("DALICE", "UALICE", card, "cancel"); !strings.Contains(got, "Cancelled: nothing was erased") {
		t.Errorf("cancel answered %q", got)
	}
	r.checkDecided("DALICE", "Cancelled by <@UALICE>: nothing was erased")
	posts := len(r.surface.Posts())
	if got := r.click("DALICE", "UALICE", card, "erase"); !strings.Contains(got, "already cancelled") {
		t.Errorf("erase after cancel answered %q", got)
	}
	if n := len(r.surface.Posts()); n != posts {
		t.Errorf("a click on the decided card was answered in the open: %v", r.surface.Posts()[posts:])
	}
	if r.count(core.KindCommandRedacted, "") != 0 || len(r.holding("zebrafjord")) == 0 {
		t.Errorf("a cancelled forget erased something")
	}
}

// `export my data` in a DM on a surface that takes files: one JSON upload
// to the asker's DM holding their memories, the note that mentions them,
// their kept messages with their texts and their consent, and nothing of
// Bob's; asked in a channel, nothing is uploaded.
func TestEngineExportMyData(t *testing.T) {
	r := newForgetRig(t)
	r.say("C1", "UALICE", "remember the vault code is zebrafjord 7731")
	r.say("C2", "UBOB", "remember <@UALICE> owns the pelican dashboard")
	r.say("C2", "UBOB", "remember the coffee machine is broken")
	r.say("C2", "UALICE", "how is the quokka migration going")
	gd, err := r.b.Human(core.Person{ID: "UALICE"}, core.Scope{Platform: "test", Workspace: "W", Channel: "C2"}, core.Meta{},
		&core.ConsentGranted{ConsentID: "c-alice", Tool: "post_message", Destination: "C2", Owner: "UALICE", Covers: core.CoversChannel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Append(t.Context(), gd); err != nil {
		t.Fatal(err)
	}
	if got := r.say("C1", "UALICE", "export my data"); !strings.Contains(got, "only in a direct message") || len(r.surface.Uploads()) != 0 {
		t.Errorf("export in a channel answered %q, uploads %d", got, len(r.surface.Uploads()))
	}
	if got := r.say("DALICE", "UALICE", "export my data"); !strings.Contains(got, "as JSON") {
		t.Errorf("export answered %q", got)
	}
	ups := r.surface.Uploads()
	if len(ups) != 1 || ups[0].Scope.Channel != "DALICE" || ups[0].File.Type != "application/json" {
		t.Fatalf("uploads: %+v", ups)
	}
	var ex engine.Export
	if err := json.Unmarshal(ups[0].File.Content, &ex); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, ups[0].File.Content)
	}
	got := map[string][]string{}
	for _, ch := range ex.Channels {
		data, _ := json.Marshal(ch)
		var m map[string][]map[string]any
		_ = json.Unmarshal(data, &m)
		for kind, rows := range m {
			for _, row := range rows {
				got[ch.Channel+" "+kind] = append(got[ch.Channel+" "+kind], fmt.Sprint(row["text"], row["id"], row["yours"]))
			}
		}
	}
	if ex.User != "UALICE" || ex.Platform != "test" {
		t.Errorf("export of %s on %s", ex.User, ex.Platform)
	}
	want := func(key, sub string) {
		t.Helper()
		for _, row := range got[key] {
			if strings.Contains(row, sub) {
				return
			}
		}
		t.Errorf("export lacks %q under %s: %v", sub, key, got)
	}
	want("test/W/C1 memories", "the vault code is zebrafjord 7731")
	want("test/W/C1 messages", "remember the vault code is zebrafjord 7731")
	want("test/W/C2 memories", "<@UALICE> owns the pelican dashboard")
	want("test/W/C2 messages", "how is the quokka migration going")
	want("test/W/C2 consents", "c-alice")
	raw := string(ups[0].File.Content)
	if strings.Contains(raw, "coffee") || strings.Contains(raw, "UBOB") && !strings.Contains(raw, `"author": "UBOB"`) {
		t.Errorf("the export holds Bob's data:\n%s", raw)
	}
}
