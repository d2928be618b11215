package redis_test

import (
	"context"
	"crypto/ed25519"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/intent/windowtest"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/store/redis"
)

func TestWindowStoreConformance(t *testing.T) {
	c := testredis.Client(t, 0)
	windowtest.Run(t, func(t *testing.T) intent.WindowStore {
		return redis.NewWindowStore(c, testredis.Prefix(t, c))
	})
}

// TestWindowStoreKeys pins the key layout: prefixed, TTL'd, one hash tag
// per channel.
func TestWindowStoreKeys(t *testing.T) {
	ctx := context.Background()
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	s := redis.NewWindowStore(c, prefix)
	until := time.Now().Add(20 * time.Minute).Truncate(time.Millisecond)
	if err := s.ExtendThread(ctx, "slack/T1/C1", "1700.01", until); err != nil {
		t.Fatal(err)
	}
	if err := s.SetToplevel(ctx, "slack/T1/C1", intent.Toplevel{Person: "U1", At: time.Now(), Until: until}); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{prefix + "w:11:{slack/T1/C1}:t:1700.01": true, prefix + "w:11:{slack/T1/C1}:top": true}
	if len(keys) != len(want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for _, k := range keys {
		if !want[k] {
			t.Fatalf("unexpected key %q", k)
		}
		exp, err := c.PExpireTime(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.UnixMilli(int64(exp / time.Millisecond)); !got.Equal(until) {
			t.Fatalf("%s expires at %v, want %v", k, got, until)
		}
	}
}

// TestWindowStoreCorruptValue: a value this code did not write is an error,
// not a silently open window.
func TestWindowStoreCorruptValue(t *testing.T) {
	ctx := context.Background()
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	s := redis.NewWindowStore(c, prefix)
	if err := c.Set(ctx, prefix+"w:11:{slack/T1/C1}:top", "garbage", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Windows(ctx, "slack/T1/C1", ""); err == nil || !strings.Contains(err.Error(), "slack/T1/C1") {
		t.Fatalf("corrupt top-level value: err = %v", err)
	}
	if err := c.Set(ctx, prefix+"w:11:{slack/T1/C1}:t:th", "soon", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, prefix+"w:11:{slack/T1/C1}:top").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Windows(ctx, "slack/T1/C1", "th"); err == nil {
		t.Fatal("corrupt thread value: no error")
	}
	// ExtendThread overwrites a corrupt thread value rather than failing.
	until := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	if err := s.ExtendThread(ctx, "slack/T1/C1", "th", until); err != nil {
		t.Fatal(err)
	}
	w, err := s.Windows(ctx, "slack/T1/C1", "th")
	if err != nil || !w.ThreadUntil.Equal(until) {
		t.Fatalf("after overwrite: %+v, %v", w, err)
	}
}

// TestRedisFilterAcrossReplicas: two filters (two replicas) on one Redis
// see each other's windows.
func TestRedisFilterAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	a := intent.NewFilter(redis.NewWindowStore(c, prefix), nil)
	b := intent.NewFilter(redis.NewWindowStore(c, prefix), nil)
	scope := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}
	if err := a.Posted(ctx, intent.Post{Channel: scope.Key(), Thread: "m1", MessageID: "b1", Answering: "m1", AnsweringUser: "U1", AnsweringTop: true}, core.Policy{}); err != nil {
		t.Fatal(err)
	}
	inThread := core.Event{Scope: scope, Visibility: core.Public, MessageID: "m2", Author: core.Person{ID: "U2"}}
	inThread.Scope.Thread = "m1"
	top := core.Event{Scope: scope, Visibility: core.Public, MessageID: "m3", Author: core.Person{ID: "U1"}}
	other := core.Event{Scope: scope, Visibility: core.Public, MessageID: "m4", Author: core.Person{ID: "U2"}}
	for _, tc := range []struct {
		ev   core.Event
		want intent.Reason
	}{{inThread, intent.ReasonThreadWindow}, {top, intent.ReasonToplevelWindow}, {other, intent.ReasonNoWindow}} {
		d, err := b.Decide(ctx, tc.ev)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != tc.want {
			t.Errorf("%s: %v, want %s", tc.ev.MessageID, d, tc.want)
		}
	}
}

// TestRedisRebuild restores windows into Redis from a journal tail,
// skipping those already over.
func TestRedisRebuild(t *testing.T) {
	ctx := context.Background()
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	s := redis.NewWindowStore(c, prefix)

	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := core.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	at := now
	bd := core.NewBoundary(func() time.Time { return at })
	var cmds []core.Command
	var prev core.Hash
	post := func(when time.Time, thread string, p core.MessagePosted) {
		at = when
		d, err := bd.Agent("run1", core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: thread}, core.Meta{}, &p)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := signer.Seal(d, uint64(len(cmds)+1), prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = cmd.Hash()
		cmds = append(cmds, cmd)
	}
	post(now.Add(-time.Hour), "old", core.MessagePosted{MessageID: "b0", Answering: "old", AnsweringUser: "U9", AnsweringTop: true})
	post(now.Add(-time.Minute), "m1", core.MessagePosted{MessageID: "b1", Answering: "m1", AnsweringUser: "U1", AnsweringTop: true})
	n, err := intent.Rebuild(ctx, s, cmds, nil, now)
	if err != nil || n != 2 {
		t.Fatalf("Rebuild: %d windows, %v; want 2", n, err)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys after rebuild: %v, %v", keys, err)
	}
	w, err := s.Windows(ctx, "slack/T1/C1", "m1")
	if err != nil {
		t.Fatal(err)
	}
	wantTop := intent.Toplevel{Person: "U1", At: now.Add(-time.Minute).UTC(), Until: now.Add(5 * time.Minute).UTC()}
	if !w.ThreadUntil.Equal(now.Add(19*time.Minute)) || w.Toplevel != wantTop {
		t.Fatalf("windows after rebuild: %+v", w)
	}
}

// BenchmarkRedisFilter: 16 concurrent callers deciding messages that all
// need a window read (one MGET each).
func BenchmarkRedisFilter(b *testing.B) {
	ctx := context.Background()
	c := testredis.Client(b, 32)
	prefix := testredis.Prefix(b, c)
	f := intent.NewFilter(redis.NewWindowStore(c, prefix), nil)
	scope := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}
	if err := f.Posted(ctx, intent.Post{Channel: scope.Key(), Thread: "m1", MessageID: "b1", Answering: "m1", AnsweringUser: "U1", AnsweringTop: true}, core.Policy{}); err != nil {
		b.Fatal(err)
	}
	mk := func(thread, author string) core.Event {
		e := core.Event{Scope: scope, Visibility: core.Public, MessageID: "m", Author: core.Person{ID: author}, Text: "x"}
		e.Scope.Thread = thread
		return e
	}
	events := []core.Event{mk("m1", "U2"), mk("", "U1"), mk("", "U2"), mk("cold", "U3")}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((16 + procs - 1) / procs) // 16 goroutines on this 2-core machine
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := f.Decide(ctx, events[i%len(events)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
	b.ReportMetric(float64(procs*((16+procs-1)/procs)), "callers")
}
