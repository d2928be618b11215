package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/lanes"
)

// socketPingTimeout is how long Socket Mode waits for Slack's WebSocket ping
// before it reconnects.
const socketPingTimeout = 30 * time.Second

// socketQueued is how many envelopes may wait or be in delivery at once;
// beyond it the socket is not read (back-pressure: Slack redelivers).
const socketQueued = 512

// socketJob is one Socket Mode envelope waiting in its channel's lane.
type socketJob struct {
	envelopeID string
	channel    string
	// build normalises the envelope on the lane's goroutine (it may call
	// conversations.info), so a slow lookup never stalls the reader.
	build    func(ctx context.Context) []inbound
	received time.Time
	retry    int
}

// runSocket receives over Socket Mode until ctx ends. Envelopes wait in
// one lane per channel (one channel's messages stay in order; a slow
// delivery holds back no other channel) and each is acknowledged only
// after deliver returned nil for all its items. Told to stop, it reads no
// more envelopes but still delivers and acknowledges those queued, over
// the socket it keeps open, for up to Config.DrainTimeout (drainJobs).
func (a *Adapter) runSocket(parent context.Context, deliver func(context.Context, core.Inbound) error) error {
	// ctx ends the reading; sctx the socket and qctx the lanes, both only
	// after the drain.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	sctx, scancel := context.WithCancel(context.WithoutCancel(parent))
	defer scancel()
	qctx, qcancel := context.WithCancel(context.WithoutCancel(parent))
	defer qcancel()

	smc := socketmode.New(a.api,
		socketmode.OptionLog(slogBridge{l: a.log}),
		socketmode.OptionPingInterval(socketPingTimeout),
	)

	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() {
		err := smc.RunContext(sctx)
		runErr <- err
		cancel()
	})

	jobs := lanes.New(socketQueued, lanes.Deliveries, func(job socketJob) { a.handleSocketJob(qctx, smc, job, deliver) })
	a.socketJobs.Store(jobs)
	defer a.socketJobs.Store(nil)

	a.dispatchSocket(ctx, smc, jobs)

	a.drainJobs(jobs, qcancel)
	scancel()
	wg.Wait()
	err := <-runErr
	if err == nil || parent.Err() != nil {
		return nil // stopped by the caller
	}
	return fmt.Errorf("slack: socket mode: %w", err)
}

// drainJobs waits, at most Config.DrainTimeout, for the lanes to deliver
// and acknowledge what they hold, then ends their context (what is still
// queued is left unacknowledged: Slack redelivers it) and waits for them.
func (a *Adapter) drainJobs(jobs *lanes.Lanes[socketJob], cancel context.CancelFunc) {
	left := jobs.Len()
	if !jobs.Drain(a.cfg.DrainTimeout, cancel) {
		a.log.Warn("slack: drain timed out; envelopes still queued are left for Slack to redeliver", "timeout", a.cfg.DrainTimeout, "queued_at_stop", left)
	}
}

// dispatchSocket reads the socketmode client's events until ctx ends.
func (a *Adapter) dispatchSocket(ctx context.Context, smc *socketmode.Client, jobs *lanes.Lanes[socketJob]) {
	for {
		var evt socketmode.Event
		select {
		case <-ctx.Done():
			return
		case evt = <-smc.Events:
		}
		now := a.now()
		switch evt.Type {
		case socketmode.EventTypeConnecting:
			a.log.Debug("slack: socket mode connecting")
		case socketmode.EventTypeConnected:
			a.log.Info("slack: socket mode connected")
			// Re-resolve identity on every (re)connect: a reinstall can change it.
			a.bg.Go(func() {
				ictx, icancel := context.WithTimeout(ctx, 10*time.Second)
				defer icancel()
				if _, err := a.refreshIdentity(ictx); err != nil && ctx.Err() == nil {
					a.log.Warn("slack: identity refresh after connect failed", "err", err)
				}
			})
		case socketmode.EventTypeHello:
			a.log.Debug("slack: socket mode hello")
		case socketmode.EventTypeConnectionError:
			a.log.Warn("slack: socket mode connection error", "err", connErr(evt.Data))
		case socketmode.EventTypeInvalidAuth:
			a.log.Error("slack: socket mode: invalid app token (SLACK_APP_TOKEN)")
		case socketmode.EventTypeIncomingError:
			a.log.Debug("slack: socket mode read error", "err", connErr(evt.Data))
		case socketmode.EventTypeErrorWriteFailed:
			// An ack did not go out: Slack will redeliver; dedupe absorbs it.
			a.log.Warn("slack: socket mode ack write failed")
		case socketmode.EventTypeErrorBadMessage:
			a.ackUnparsable(ctx, smc, evt.Data)
		case socketmode.EventTypeDisconnect:
			a.log.Info("slack: socket mode disconnect requested; reconnecting")
		case socketmode.EventTypeEventsAPI:
			if evt.Request == nil {
				continue
			}
			ev, ok := evt.Data.(slackevents.EventsAPIEvent)
			if !ok || (ev.Type == slackevents.CallbackEvent && a.lifecycle(ev)) {
				a.ack(ctx, smc, evt.Request.EnvelopeID)
				continue
			}
			a.enqueue(ctx, smc, jobs, socketJob{
				envelopeID: evt.Request.EnvelopeID,
				channel:    channelOfEvent(ev),
				build:      func(ctx context.Context) []inbound { return a.fromEventsAPI(ctx, ev) },
				received:   now,
				retry:      evt.Request.RetryAttempt,
			})
		case socketmode.EventTypeInteractive:
			if evt.Request == nil {
				continue
			}
			ic, ok := evt.Data.(slack.InteractionCallback)
			if !ok {
				a.ack(ctx, smc, evt.Request.EnvelopeID)
				continue
			}
			items := markReplays(a.fromInteraction(&ic), evt.Request.RetryAttempt)
			a.enqueue(ctx, smc, jobs, socketJob{
				envelopeID: evt.Request.EnvelopeID,
				channel:    ic.Channel.ID,
				build:      func(context.Context) []inbound { return items },
				received:   now,
				retry:      evt.Request.RetryAttempt,
			})
		case socketmode.EventTypeSlashCommand:
			if evt.Request != nil {
				a.ack(ctx, smc, evt.Request.EnvelopeID)
			}
		default:
			if evt.Request != nil && evt.Request.EnvelopeID != "" {
				a.ack(ctx, smc, evt.Request.EnvelopeID)
			}
		}
	}
}

// enqueue queues an envelope in its channel's lane, waiting while too many
// are queued (the socket is not read meanwhile; Slack redelivers what goes
// unacknowledged).
func (a *Adapter) enqueue(ctx context.Context, smc *socketmode.Client, jobs *lanes.Lanes[socketJob], job socketJob) {
	if job.channel == "" {
		// Nothing we deliver (another event type): acknowledge at once.
		a.ack(ctx, smc, job.envelopeID)
		return
	}
	_ = jobs.Add(ctx, job.channel, job) // fails only when shutting down: Slack redelivers
}

func (a *Adapter) handleSocketJob(ctx context.Context, smc *socketmode.Client, job socketJob, deliver func(context.Context, core.Inbound) error) {
	if ctx.Err() != nil {
		return // shutting down: leave it unacknowledged, Slack redelivers
	}
	deadline := job.received.Add(a.cfg.AckTimeout)
	if floor := a.now().Add(a.cfg.AckTimeout / 5); deadline.Before(floor) {
		deadline = floor
	}
	items := job.build(ctx)
	if err := a.deliverAll(ctx, items, deliver, deadline); err != nil {
		a.log.Warn("slack: delivery not acknowledged; Slack will redeliver", "envelope", job.envelopeID, "retry", job.retry, "err", err)
		return
	}
	a.ack(ctx, smc, job.envelopeID)
	a.acked(job.received)
}

func (a *Adapter) ack(ctx context.Context, smc *socketmode.Client, envelopeID string) {
	if envelopeID == "" {
		return
	}
	// Bounded: while slack-go reconnects, its queue of responses is not
	// read until this loop reads its events, and this loop waits for the
	// lanes these acks hold. An ack that waits longer than Slack does is
	// pointless: the envelope comes again.
	actx, cancel := context.WithTimeout(ctx, a.cfg.AckTimeout)
	defer cancel()
	if err := smc.AckCtx(actx, envelopeID, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("slack: socket mode ack failed", "envelope", envelopeID, "err", err)
	}
}

// ackUnparsable acknowledges an envelope slack-go could not parse (an event
// type it does not know): redelivering it would fail the same way.
func (a *Adapter) ackUnparsable(ctx context.Context, smc *socketmode.Client, data any) {
	bad, ok := data.(*socketmode.ErrorBadMessage)
	if !ok {
		return
	}
	var env struct {
		Type       string `json:"type"`
		EnvelopeID string `json:"envelope_id"`
	}
	if json.Unmarshal(bad.Message, &env) != nil || env.EnvelopeID == "" {
		a.log.Debug("slack: unparsable socket mode message")
		return
	}
	a.log.Debug("slack: unparsable envelope acknowledged", "type", env.Type, "envelope", env.EnvelopeID)
	a.ack(ctx, smc, env.EnvelopeID)
}

// channelOfEvent is the channel of the message events we deliver, "" for
// every other event (acknowledged without delivery).
func channelOfEvent(ev slackevents.EventsAPIEvent) string {
	if ev.Type != slackevents.CallbackEvent {
		return ""
	}
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		return e.Channel
	case *slackevents.MessageEvent:
		return e.Channel
	case *slackevents.AppHomeOpenedEvent:
		return e.Channel // the Home tab is published before the ack (home.go)
	case *slackevents.AssistantThreadStartedEvent:
		return e.AssistantThread.ChannelID // the panel is set up before the ack (assistant.go)
	}
	return ""
}

func connErr(data any) error {
	switch d := data.(type) {
	case *slack.ConnectionErrorEvent:
		return d.ErrorObj
	case *slack.IncomingEventError:
		return d.ErrorObj
	case error:
		return d
	}
	return nil
}
