package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
)

// cutProxy forwards TCP to a target until cut: then it drops every
// connection and refuses new ones, as a database that went away does, for
// one client only.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// TestReplicaDatabaseOutageAnswersEachMessageOnce: two replicas, and the
// database goes away for 10 s for one of them only, mid-stream. Its leases
// lapse and the other replica takes its channels over; when it gets the
// database back it finds it was deposed and posts nothing for them. Every
// mention is answered exactly once, none is lost, nothing is restarted.
func TestReplicaDatabaseOutageAnswersEachMessageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs two replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	pu := *u
	pu.Host = proxy.ln.Addr().String()
	rs := testredis.StartServer(t)
	sl := slackfake.New(slackfake.Config{EchoPosts: true, RedeliverAfter: 2 * time.Second, MaxRetries: 10,
		Channels: map[string]string{qaGeneral: "channel", qaOther: "channel"},
		Users:    []slackfake.User{{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}}})
	t.Cleanup(sl.Close)
	modelURL := slowModel(t, 300*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	for i, db := range []string{pu.String(), dbURL} {
		dir := t.TempDir()
		reps = append(reps, &replicaProc{t: t, bin: bin, name: fmt.Sprintf("r%d", i), logs: &syncBuffer{}, env: replicaEnv(dir, fmt.Sprintf("r%d", i), db, rs.URL(), key, sl.APIURL(), modelURL, "MARLOWE_LEASE_TTL=2s")})
	}
	dump := func() string { return dumpLogs(reps) }
	mention := "<@" + sl.Config().BotUserID + ">"
	answered := func(word string) int {
		n := 0
		for _, p := range sl.Posts() {
			if strings.Contains(p.Text, "You said:") && strings.Contains(p.Text, word) {
				n++
			}
		}
		return n
	}
	channels := []string{qaGeneral, qaOther}
	const mentions = 24
	// r0 alone hears the first message of each channel, so it owns both
	// when the database goes away for it; then r1 joins.
	reps[0].start()
	t.Cleanup(reps[0].kill)
	waitConns(t, sl, 1, reps)
	for i := range 2 {
		sl.Say(channels[i], "", qaAlice, mention+fmt.Sprintf(" please echo ow%03d", i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(claimedBy(reps[0])) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("r0 never claimed both channels\n%s", dump())
		}
		time.Sleep(10 * time.Millisecond)
	}
	reps[1].start()
	t.Cleanup(reps[1].kill)
	waitConns(t, sl, 2, reps)
	for i := 2; i < mentions; i++ {
		sl.Say(channels[i%2], "", qaAlice, mention+fmt.Sprintf(" please echo ow%03d", i))
		if i == 8 {
			proxy.cut()
			go func() { time.Sleep(10 * time.Second); proxy.restore() }()
		}
		time.Sleep(150 * time.Millisecond)
	}
	deadline = time.Now().Add(90 * time.Second)
	for i := 0; i < mentions; {
		if answered(fmt.Sprintf("ow%03d", i)) > 0 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("ow%03d never answered\n%s", i, dump())
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitRunsEnded(t, dbURL, dump)
	for i := range mentions {
		if n := answered(fmt.Sprintf("ow%03d", i)); n != 1 {
			t.Errorf("ow%03d answered %d times", i, n)
		}
	}
	// r1 takes a lapsed channel over either by its sweep or by claiming it
	// for the next event it hears there; both are a claim.
	if took := claimedBy(reps[1]); len(took) == 0 {
		t.Errorf("the replica with the database never took a channel of the cut one over: the outage missed the owner")
	}
	for _, r := range reps {
		select {
		case <-r.exited:
			t.Errorf("replica %s exited during the outage (it must ride it out)", r.name)
		default:
		}
		r.stop()
	}
	verifyReplicas(t, bin, reps[1], dump)
}

// claimedBy lists the channels r's log says it claimed.
func claimedBy(r *replicaProc) map[string]bool {
	chs := map[string]bool{}
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if !strings.Contains(line, `msg="channel claimed"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if ch, ok := strings.CutPrefix(f, "channel="); ok {
				chs[ch] = true
			}
		}
	}
	return chs
}
