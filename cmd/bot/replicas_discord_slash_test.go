package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
)

// TestReplicasAnswerDiscordSlashCommandsOnceThroughAKill: two replicas of
// the built binary (Postgres, Redis), each with its own gateway session, so
// both receive every INTERACTION_CREATE. /marlowe is registered at start;
// 12 uses of `/marlowe ask` at once, with a model slower than Discord's
// 3 s, are all deferred within the 3 s; the replica owning the channels is
// SIGKILLed while the runs wait for the model, and restarted. Every ask is
// answered in its own interaction's response, as the person's own message,
// and nowhere else (no channel or thread message carries an answer, no
// follow-up message is created). `/marlowe inbox` is deferred ephemerally
// and its inbox goes to the invoker's DM only. The journal verifies.
func TestReplicasAnswerDiscordSlashCommandsOnceThroughAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs two replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	dc := newDiscordReplicaFake(t, true)
	modelURL := slowModel(t, 3500*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	dump := func() string { return dumpLogs(reps) }
	for i := range 2 {
		name := fmt.Sprintf("s%d", i)
		r := &replicaProc{t: t, bin: bin, name: name, logs: &syncBuffer{},
			env: discordReplicaEnv(t.TempDir(), name, dbURL, rs.URL(), key, dc.APIURL(), modelURL, "MARLOWE_LEASE_TTL=2s")}
		reps = append(reps, r)
		r.start()
		t.Cleanup(r.kill)
		if !dc.Wait(qaStartTimeout, func() bool { return dc.LiveSessionsLocked() == i+1 }) {
			t.Fatalf("live gateway sessions never reached %d\n%s", i+1, dump())
		}
	}
	if cmds := dc.Commands(); len(cmds) != 1 || cmds[0].Name != "marlowe" {
		t.Fatalf("registered commands %+v, want /marlowe", cmds)
	}

	const asks = 12
	ids := make([]string, asks)
	who := map[string]string{} // task → the user who asked
	for i := range asks {
		u := []discordfake.User{drAlice, drBob}[i%2]
		task := fmt.Sprintf("please echo sq%03d", i)
		ids[i] = dc.Slash(discordfake.Slash{Channel: []string{drGeneral, drOps}[i%2], User: u, Sub: "ask",
			Options: map[string]string{"task": task}})
		who[task] = u.ID
	}
	if !dc.Wait(10*time.Second, func() bool { return len(dc.CallbacksLocked()) == asks }) {
		t.Fatalf("%d of %d asks acknowledged\n%s", len(dc.Callbacks()), asks, dump())
	}
	for _, cb := range dc.Callbacks() {
		if cb.Type != 5 || cb.Latency >= 3*time.Second {
			t.Errorf("ask %s answered with type %d after %v, want a deferral (5) within 3 s", cb.InteractionID, cb.Type, cb.Latency)
		}
	}
	// Kill the owner once every ask is journaled and its run waits for the
	// model: the answers come from the other replica or the restarted one.
	waitJournaled(t, dbURL, asks, dump)
	r := reps[owner(t, dbURL, reps)]
	r.kill()
	r.start()

	answer := func(i int) string { return fmt.Sprintf("sq%03d", i) }
	if !dc.Wait(90*time.Second, func() bool {
		for i, id := range ids {
			if m := dc.OriginalLocked(id); m == nil || !strings.Contains(m.Content, "You said:") || !strings.Contains(m.Content, answer(i)) {
				return false
			}
		}
		return true
	}) {
		for _, id := range ids {
			t.Logf("response of %s: %+v", id, dc.Original(id))
		}
		t.Fatalf("not every ask was answered in its response\n%s", dump())
	}
	waitRunsEnded(t, dbURL, dump)
	for _, p := range dc.Posts() {
		if strings.Contains(p.Content, "You said:") {
			t.Errorf("an answer was posted as a channel or thread message too: %+v", p)
		}
	}
	responses := map[string]bool{}
	for _, id := range ids {
		responses[dc.Original(id).ID] = true
	}
	for _, p := range dc.Posts() {
		if !responses[p.ChannelID] {
			t.Errorf("post %q in %s, want only threads on the responses", p.Content, p.ChannelID)
		}
	}
	for _, fu := range dc.Followups() {
		if !fu.Original {
			t.Errorf("a follow-up message was created: %+v", fu)
		}
	}
	for i, id := range ids {
		if m := dc.Original(id); m.Flags&discordfake.FlagLoading != 0 || strings.Count(m.Content, answer(i)) != 1 {
			t.Errorf("response of ask %d: %+v, want its one answer, finished", i, m)
		}
	}
	checkAskAuthors(t, dbURL, who)
	if !strings.Contains(dump(), "took over a lapsed channel") {
		t.Errorf("no replica took over the killed owner's channels (the kill missed the owner)")
	}

	// /marlowe inbox: ephemeral, and the inbox itself in bob's DM only.
	if !dc.Wait(qaStartTimeout, func() bool { return dc.LiveSessionsLocked() == 2 }) {
		t.Fatalf("the restarted replica never reconnected\n%s", dump())
	}
	iid := dc.Slash(discordfake.Slash{Channel: drGeneral, User: drBob, Sub: "inbox"})
	if !dc.Wait(60*time.Second, func() bool {
		m := dc.OriginalLocked(iid)
		return m != nil && m.Content != ""
	}) {
		t.Fatalf("inbox never answered: %+v\n%s", dc.Original(iid), dump())
	}
	if m := dc.Original(iid); m.Flags&discordfake.FlagEphemeral == 0 || dc.ChannelOf(m.ID) != "" || !strings.Contains(m.Content, "direct message") {
		t.Errorf("inbox response %+v, want the ephemeral pointer to the DM", m)
	}
	bobDM := "9" + drBob.ID[1:] // the fake's DM channel id
	inDM := 0
	for _, p := range dc.Posts() {
		if strings.Contains(p.Content, "Nothing waits for you") {
			if p.ChannelID != bobDM {
				t.Errorf("inbox posted in %s, want only bob's DM: %q", p.ChannelID, p.Content)
			}
			inDM++
		}
	}
	if inDM != 1 {
		t.Errorf("%d inbox posts in bob's DM, want 1; posts %+v", inDM, dc.Posts())
	}
	sid := dc.Slash(discordfake.Slash{Channel: drOps, User: drAlice, Sub: "status"})
	if !dc.Wait(60*time.Second, func() bool {
		m := dc.OriginalLocked(sid)
		return m != nil && m.Content != ""
	}) {
		t.Fatalf("status never answered: %+v\n%s", dc.Original(sid), dump())
	}
	if m := dc.Original(sid); m.Flags&discordfake.FlagEphemeral != 0 || m.Flags&discordfake.FlagLoading != 0 {
		t.Errorf("status response %+v, want a public finished answer", m)
	}
	waitRunsEnded(t, dbURL, dump)
	for _, r := range reps {
		r.stop()
	}
	verifyReplicas(t, bin, reps[1], dump)
}

// waitJournaled waits until n runs have started in the journal.
func waitJournaled(t *testing.T, dbURL string, n int, dump func() string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM commands WHERE kind = 'run.started'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs started\n%s", got, n, dump())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkAskAuthors checks each ask was journaled as message.received
// once, with the person who used the command as its actor (byText: the
// task → that person's id).
func checkAskAuthors(t *testing.T, dbURL string, byText map[string]string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT actor_type, actor_id, convert_from(payload, 'UTF8')::jsonb->>'text'
		FROM commands WHERE kind = 'message.received'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int{}
	for rows.Next() {
		var typ, actor, text string
		if err := rows.Scan(&typ, &actor, &text); err != nil {
			t.Fatal(err)
		}
		seen[text]++
		if want, ok := byText[text]; ok && (typ != "human" || actor != want) {
			t.Errorf("%q journaled as %s %s, want human %s", text, typ, actor, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for text := range byText {
		if seen[text] != 1 {
			t.Errorf("%q journaled %d times, want once", text, seen[text])
		}
	}
}
