package slack

import (
	"time"

	pq "github.com/marlowe-bot/marlowe/internal/pacer"
)

// SetAckObserver has f told, for each platform delivery acknowledged once
// it was delivered, how long it took from receipt to the ack (the platform
// redelivers what is not acknowledged in time). Call it before Run.
func (a *Adapter) SetAckObserver(f func(time.Duration)) { a.onAck = f }

// acked reports one acknowledgement of a delivery received at received.
func (a *Adapter) acked(received time.Time) {
	if a.onAck != nil {
		a.onAck(a.now().Sub(received))
	}
}

// OutboundStats reads the outbound queue: calls waiting and rate-limit
// refusals waited out so far.
func (a *Adapter) OutboundStats() pq.Stats { return a.pacer.stats() }

// SetPaceObserver has f told, for each write sent, how long it waited in
// its pacing, by Web API method (a decoration sent waited 0; one dropped
// is counted in OutboundStats). Call it before Run.
func (a *Adapter) SetPaceObserver(f func(method string, wait time.Duration)) {
	a.pacer.waits.Set(f)
}
