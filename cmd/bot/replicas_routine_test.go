package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
)

// TestReplicasFireEachRoutineSlotOnceThroughKills: two replicas of the
// built binary, a routine every 2 s, and the replica elected to fire
// routines SIGKILLed (and restarted) twice, once during a firing. No slot
// is journaled twice, every firing is posted at most once, firings go on
// after each kill, and the journal verifies.
func TestReplicasFireEachRoutineSlotOnceThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs two replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	sl := slackfake.New(slackfake.Config{EchoPosts: true, RedeliverAfter: 2 * time.Second,
		Channels: map[string]string{qaGeneral: "channel"},
		Users:    []slackfake.User{{ID: qaAlice, Name: "alice"}}})
	t.Cleanup(sl.Close)
	modelURL := slowModel(t, 400*time.Millisecond) // a firing's run takes a while: kills land in it
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	for i := range 2 {
		dir := t.TempDir()
		r := &replicaProc{t: t, bin: bin, name: fmt.Sprintf("r%d", i), logs: &syncBuffer{}, env: replicaEnv(dir, fmt.Sprintf("r%d", i), dbURL, rs.URL(), key, sl.APIURL(), modelURL, "MARLOWE_LEASE_TTL=2s", "MARLOWE_ROUTINE_MIN_INTERVAL=1s", "MARLOWE_ROUTINE_TICK=100ms", "MARLOWE_ROUTINE_GRACE=1m")}
		reps = append(reps, r)
		r.start()
		t.Cleanup(r.kill)
		waitConns(t, sl, i+1, reps)
	}
	dump := func() string { return dumpLogs(reps) }
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	count := func(q string) int {
		var n int
		if err := conn.QueryRow(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fired := func() int { return count(`SELECT count(*) FROM commands WHERE kind = 'routine.fired'`) }
	waitFired := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); fired() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d firings\n%s", n, dump())
			}
		}
	}
	firer := func() *replicaProc {
		t.Helper()
		var holder string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			err := conn.QueryRow(t.Context(), `SELECT holder FROM leases WHERE name = 'scheduler' AND holder <> '' AND expires_at > clock_timestamp()`).Scan(&holder)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica holds the scheduler lease: %v\n%s", err, dump())
			}
		}
		for _, r := range reps {
			if strings.HasPrefix(holder, r.name+"-") {
				return r
			}
		}
		t.Fatalf("scheduler lease held by %q", holder)
		return nil
	}

	sl.Say(qaGeneral, "", qaAlice, "<@"+sl.Config().BotUserID+"> routine add @every 2s: failover digest")
	waitFired(2)
	// Kill the firer while a firing's run is in flight, then again later.
	for range 2 {
		start := count(`SELECT count(*) FROM commands WHERE kind = 'run.started' AND thread = ''`)
		for deadline := time.Now().Add(30 * time.Second); count(`SELECT count(*) FROM commands WHERE kind = 'run.started' AND thread = ''`) <= start; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no firing started\n%s", dump())
			}
		}
		r := firer()
		r.kill()
		r.start()
		n := fired()
		waitFired(n + 2) // firings go on after the kill
	}
	for _, r := range reps {
		r.stop()
	}
	if n := count(`SELECT count(*) FROM (SELECT convert_from(payload, 'UTF8')::jsonb->>'routine_id', convert_from(payload, 'UTF8')::jsonb->>'slot'
		FROM commands WHERE kind = 'routine.fired' GROUP BY 1, 2 HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d routine slots journaled more than once", n)
	}
	if n := count(`SELECT count(*) FROM (SELECT run FROM commands WHERE kind = 'message.posted' AND thread = '' AND run <> ''
		GROUP BY run HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d firings journaled two top-level posts", n)
	}
	// On the platform: each top-level post of the bot is one journaled post.
	top := 0
	for _, p := range sl.Posts() {
		if p.Channel == qaGeneral && p.ThreadTS == "" {
			top++
		}
	}
	if j := count(`SELECT count(*) FROM commands WHERE kind = 'message.posted' AND thread = ''`); top != j {
		t.Errorf("%d top-level posts on Slack, %d journaled: a firing was posted twice (or lost)", top, j)
	}
	verifyReplicas(t, bin, reps[0], dump)
}
