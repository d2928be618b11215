package telegram

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

// A document is a message to Telegram: it goes through the chat's queue,
// so it keeps to the group's 20 a minute and a 429's retry_after is waited
// out, as a sendMessage's is. UploadFile called the Bot API directly: a
// 429 failed the upload and a file never counted in the chat's budget.
func TestUploadIsPacedAsAMessage(t *testing.T) {
	file := core.File{Name: "report.csv", Title: "the report", Type: "text/csv", Content: []byte("a,b\n1,2\n")}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"retry_after honoured", func(t *testing.T) {
			f := newFake(t)
			a, _ := newAdapter(t, testConfig(f, ModePolling))
			f.RateLimit("sendDocument", 1, time.Second)
			start := time.Now()
			if err := a.UploadFile(t.Context(), scope("-1001", ""), file); err != nil {
				t.Fatalf("upload after a 429: %v", err)
			}
			if d := time.Since(start); d < time.Second {
				t.Errorf("sent again after %v, before retry_after (1s)", d)
			}
			if n, docs := f.CallCount("sendDocument"), len(f.Documents()); n != 2 || docs != 1 {
				t.Errorf("%d sendDocument calls, %d documents; want the refused one and its retry", n, docs)
			}
			if n := a.pacer.q.RateLimited(); n != 1 {
				t.Errorf("pacer waited out %d refusals, want 1", n)
			}
		}},
		{"counted in the group's minute", func(t *testing.T) {
			f := newFake(t)
			a, _ := newAdapter(t, testConfig(f, ModePolling))
			clock := pacertest.New()
			start := clock.Now()
			a.pacer = newPacer(clock.Now, clock.After, paceConfig{chatInterval: time.Second, chatBurst: 3, groupPerMinute: 1}, a.log)
			if _, err := a.Post(t.Context(), core.Outbound{Scope: scope("-1001", ""), Text: "the answer", Priority: core.PriorityHigh}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- a.UploadFile(context.WithoutCancel(t.Context()), scope("-1001", ""), file) }()
			eventually(t, "the upload queued behind the group's minute", func() bool {
				n, _ := a.pacer.q.Queued(group.ID, core.PriorityHigh)
				return n == 1
			})
			if n := len(f.Documents()); n != 0 {
				t.Fatalf("the document went within the minute (%d sent)", n)
			}
			// The clock moves timer by timer (the queue's wait may be set
			// just after a move) until the upload returns.
			for sent := false; !sent; {
				if at, ok := clock.NextTimer(); ok {
					clock.AdvanceTo(at)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					sent = true
				case <-time.After(10 * time.Millisecond):
				}
			}
			if d := clock.Now().Sub(start); d < time.Minute {
				t.Errorf("the document went %v after the group's last message, within its minute", d)
			}
			if n := len(f.Documents()); n != 1 {
				t.Fatalf("%d documents after the minute, want 1", n)
			}
			clock.Advance(time.Hour) // the queue runs dry and exits
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}
