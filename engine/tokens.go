package engine

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/marlowe-bot/marlowe/core"
)

// Token streaming: while a model call runs in a run whose checklist is an
// open stream, the reply's text is shown in that stream as the model
// writes it. The text is state (the whole text so far, not a delta), so a
// retry, a failover or a resumed run after a crash may show another text:
// the surface appends only what extends what it shows, and the answer's
// stop leaves the message holding exactly the answer (core.Streamer). None
// of it is journaled: the answer is, when the stream stops (stream.go).

// streamTokens returns where the model call streams its text, and a stop
// that ends the sending and waits for it; nil when the run has no open
// stream or the model cannot stream. The sender keeps only the latest
// text (the surface paces its appends), so the model's reader never waits
// on the surface.
func (d *driver) streamTokens(ctx context.Context) (func(string, bool), func()) {
	rs := d.rs
	st := d.streamer()
	ref, open := rs.Effects[rs.checklistEffect()]
	if _, ok := d.e.model.(core.StreamingModel); !ok || st == nil || !open || rs.streamDone {
		return nil, func() {}
	}
	base := streamState(rs, rs.Status) // read here, on the driver's goroutine
	base.Resumed = rs.resumed
	latest := make(chan string, 1)
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-quit:
				return
			case text := <-latest:
				u := base
				u.Text = text
				err := st.AppendStream(ctx, ref, u)
				switch {
				case errors.Is(err, core.ErrStreamEnded):
					return // the answer gets its own post (streamAnswer)
				case err != nil:
					d.e.log.Debug("streaming the model's text failed; the answer follows whole", "run", rs.ID, "error", err)
				}
			}
		}
	}()
	calls := false
	text := func(soFar string, hasCalls bool) {
		// Called by the model call's goroutine only, one call at a time.
		if calls = calls || hasCalls; calls {
			return // text before a tool call is not the answer
		}
		if soFar = strings.TrimLeft(soFar, " \t\r\n"); soFar == "" {
			return
		}
		select {
		case <-latest: // replaced by the newer text
		default:
		}
		select {
		case latest <- soFar:
		case <-quit:
		}
	}
	stop := func() {
		close(quit)
		<-finished
	}
	return text, stop
}

// tokenRelay carries a model call's text to a stream opened while the
// call runs (the checklist posted at its delay): until then it keeps the
// latest text, which attach hands over first.
type tokenRelay struct {
	mu    sync.Mutex // serialises the calls to, so they stay in order
	to    func(string, bool)
	last  string
	calls bool
}

func (r *tokenRelay) text(soFar string, hasCalls bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.calls = soFar, r.calls || hasCalls
	if r.to != nil {
		r.to(soFar, hasCalls)
	}
}

func (r *tokenRelay) attach(to func(string, bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to = to
	if r.last != "" || r.calls {
		to(r.last, r.calls)
	}
}
