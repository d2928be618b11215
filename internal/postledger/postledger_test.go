package postledger

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGetPutExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New[string](func() time.Time { return now }, time.Hour, 3)
	l.Put("a", "ref-a")
	for _, tc := range []struct {
		name    string
		advance time.Duration
		key     string
		want    string
		ok      bool
	}{
		{"fresh", 0, "a", "ref-a", true},
		{"unknown", 0, "b", "", false},
		{"at ttl", time.Hour, "a", "ref-a", true},
		{"past ttl", time.Nanosecond, "a", "", false},
	} {
		now = now.Add(tc.advance)
		if got, ok := l.Get(tc.key); got != tc.want || ok != tc.ok {
			t.Errorf("%s: Get(%q) = %q, %v; want %q, %v", tc.name, tc.key, got, ok, tc.want, tc.ok)
		}
	}
	// The next Put sweeps the expired key.
	l.Put("b", "ref-b")
	if n := l.Len(); n != 1 {
		t.Fatalf("%d keys held after expiry, want 1", n)
	}
}

func TestPutBoundedBySize(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New[int](func() time.Time { return now }, time.Hour, 100)
	for i := range 1000 {
		l.Put(fmt.Sprint(i), i)
		now = now.Add(time.Millisecond)
	}
	if n := l.Len(); n != 100 {
		t.Fatalf("%d keys held, want 100", n)
	}
	if _, ok := l.Get("899"); ok {
		t.Fatal("an evicted key is still known")
	}
	if got, ok := l.Get("999"); !ok || got != 999 {
		t.Fatalf("newest key = %d, %v", got, ok)
	}
	// Re-putting a held key does not grow the order queue.
	for range 10 {
		l.Put("999", 999)
	}
	if len(l.order) != 100 {
		t.Fatalf("order queue holds %d keys, want 100", len(l.order))
	}
}

// Concurrent posts with one key: only the first posts, the rest find its
// ref; locks are dropped once nobody holds them.
func TestLockOnePostPerKey(t *testing.T) {
	l := New[int](time.Now, time.Hour, 1000)
	var posts atomic.Int32
	var wg sync.WaitGroup
	for k := range 4 {
		key := fmt.Sprint("k", k)
		for range 16 {
			wg.Go(func() {
				unlock := l.Lock(key)
				defer unlock()
				if _, ok := l.Get(key); ok {
					return
				}
				posts.Add(1)
				l.Put(key, k)
			})
		}
	}
	wg.Wait()
	if n := posts.Load(); n != 4 {
		t.Fatalf("%d posts for 4 keys", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.keyLock); n != 0 {
		t.Fatalf("%d key locks left after every holder unlocked", n)
	}
}

func TestLockDistinctKeysDoNotBlock(t *testing.T) {
	l := New[int](time.Now, time.Hour, 10)
	unlockA := l.Lock("a")
	defer unlockA()
	done := make(chan struct{})
	go func() {
		l.Lock("b")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("locking b waited for a")
	}
}

// A message whose second part failed is retried: the first part is not
// posted again, the second is, and the first part's ref comes back.
func TestPostPartsResumesAfterAFailedPart(t *testing.T) {
	l := New[string](time.Now, time.Hour, 10)
	var posted []string
	failSecond := true
	post := func(i int, pk string) (string, error) {
		if i == 1 && failSecond {
			return "", fmt.Errorf("boom")
		}
		posted = append(posted, pk)
		return fmt.Sprintf("ref%d", i), nil
	}
	first, err := l.PostParts("test", "k", 3, post)
	if err == nil || err.Error() != "test: part 2 of 3: boom" || first != "ref0" {
		t.Fatalf("first try = %q, %v", first, err)
	}
	failSecond = false
	first, err = l.PostParts("test", "k", 3, post)
	if err != nil || first != "ref0" {
		t.Fatalf("retry = %q, %v", first, err)
	}
	if want := []string{"k", "k#1", "k#2"}; fmt.Sprint(posted) != fmt.Sprint(want) {
		t.Errorf("posted %v, want %v (each part once)", posted, want)
	}
	// A failure of the first part returns no ref; no key: nothing recorded.
	if ref, err := l.PostParts("test", "", 1, func(int, string) (string, error) { return "", fmt.Errorf("down") }); err == nil || ref != "" {
		t.Errorf("first part failure = %q, %v", ref, err)
	}
	if got := PartKey("k", 0, 2) + "," + PartKey("k", 1, 2) + "," + PartKey("", 1, 2) + "," + PartKey("k", 0, 1); got != "k,k#1,,k" {
		t.Errorf("part keys = %s", got)
	}
}
