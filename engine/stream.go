package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

// A surface with core.Streamer shows the run's checklist as a stream: a
// plan whose tasks are the run's plan items and tool steps, the final
// answer streamed into the same message, and the stream stopped when the
// run ends or parks. Whether a run streams is decided once, when its
// checklist is posted, and journaled (message.posted's stream flag), so a
// resumed run keeps to it whatever the surface says after a restart.
//
// Each stream call is state, not a delta (the tasks as they are now, the
// whole answer so far), so repeating one after a crash is safe: the effect
// rules of effects.go hold unchanged. The answer's message.posted (role
// answer, the checklist's message id) is journaled after the stream is
// stopped; until then a resumed run streams the answer again and the
// surface appends only what the message lacks.

// wantsStream is the streamer to start the checklist with, or nil.
func (d *driver) wantsStream(ctx context.Context) core.Streamer {
	st, ok := d.s.(core.Streamer)
	if !ok || d.rs.Scope.Thread == "" || !st.Streams(ctx, d.rs.Scope) {
		return nil
	}
	return st
}

// streamer is the surface's Streamer when the run's checklist is a stream.
func (d *driver) streamer() core.Streamer {
	if !d.rs.streamed {
		return nil
	}
	st, _ := d.s.(core.Streamer)
	return st
}

// startStream posts the checklist as the start of a stream.
func (d *driver) startStream(ctx context.Context, st core.Streamer, out core.Outbound, rec postRecord) error {
	u := streamState(d.rs, d.rs.Status)
	u.Key = out.Key
	if rec.answering != nil {
		u.Recipient = rec.answering.author.ID
	}
	rec.stream = true
	rec.send = func(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
		u.Resumed = out.Resumed
		return st.StartStream(ctx, out, u)
	}
	_, err := d.e.post(ctx, d.s, d.rs, out, rec)
	return err
}

// syncStream shows rs as if in status st on the stream: its tasks while
// the run works or waits for an answer, and a stop once the run parks or
// ends. Like a checklist edit it is journaled first and cosmetic.
func (d *driver) syncStream(ctx context.Context, st core.Streamer, status core.RunStatus, text string) error {
	rs := d.rs
	eff := rs.checklistEffect()
	ref := rs.Effects[eff]
	err := d.e.journalEdit(ctx, rs, eff, ref, text, func(ctx context.Context, key string) error {
		return d.performStream(ctx, st, ref, status, key)
	})
	if errors.Is(err, core.ErrStreamEnded) {
		d.e.log.InfoContext(ctx, "stream already ended; not updating it", "run", rs.ID, "effect", eff)
		return nil
	}
	return d.e.cosmetic(ctx, err)
}

func (d *driver) performStream(ctx context.Context, st core.Streamer, ref core.MessageRef, status core.RunStatus, key string) error {
	u := streamState(d.rs, status)
	u.Key, u.Resumed = key, d.rs.resumed
	if streamStops(status) {
		return st.StopStream(ctx, ref, u)
	}
	return st.AppendStream(ctx, ref, u)
}

// streamStops reports whether a run in status st stops its stream: it
// ended, or it parked where nothing may happen for days. A wait for an
// approval keeps the stream open (the card is its own message).
func streamStops(st core.RunStatus) bool {
	return st.Terminal() || st == core.RunBlocked || st == core.RunNeedsPermission
}

// streamAnswer streams the final answer into the checklist's stream (or,
// when the run has no checklist, a stream of its own) and stops it, then
// records the answer. A stream the platform already closed
// (a pause stopped it, or it timed out) gets the answer as a post instead.
func (d *driver) streamAnswer(ctx context.Context, st core.Streamer, out core.Outbound, rec postRecord) error {
	rs := d.rs
	ref, started := rs.Effects[rs.checklistEffect()]
	u := streamState(rs, core.RunDone)
	if !started && len(u.Tasks) == 0 {
		u.Title = "" // a plain answer: no plan to show
	}
	u.Key, u.Text = out.Key, out.Text
	sent := rec
	sent.stream = true
	sent.send = func(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
		u.Resumed = out.Resumed
		if !started {
			// The start has a key of its own: the answer's key stays free
			// for the post that replaces a stream Slack closed. The stop
			// carries the same key, so a process resumed after this one
			// stopped the stream (and died before journaling the answer)
			// finds the stopped message by it and starts no second one.
			so := out
			so.Key += ":stream"
			u.Key = so.Key
			start := core.StreamUpdate{Key: so.Key, Resumed: out.Resumed}
			if rec.answering != nil {
				start.Recipient = rec.answering.author.ID
			}
			var err error
			if ref, err = st.StartStream(ctx, so, start); err != nil {
				return core.MessageRef{}, fmt.Errorf("start the answer's stream: %w", err)
			}
		}
		if err := st.AppendStream(ctx, ref, u); err != nil {
			return core.MessageRef{}, fmt.Errorf("stream the answer: %w", err)
		}
		if err := st.StopStream(ctx, ref, u); err != nil {
			return core.MessageRef{}, fmt.Errorf("stop the stream: %w", err)
		}
		return ref, nil
	}
	_, err := d.e.post(ctx, d.s, rs, out, sent)
	if errors.Is(err, core.ErrStreamEnded) {
		d.e.log.WarnContext(ctx, "the stream ended before the answer; posting the answer instead", "run", rs.ID)
		_, err = d.e.post(ctx, d.s, rs, out, rec)
	}
	return err
}

// reissueStream repeats the stream's latest state after a restart: the
// edit a crash may have cut off is state, so showing the state now does.
func (d *driver) reissueStream(ctx context.Context) error {
	rs := d.rs
	st := d.streamer()
	ref, ok := rs.Effects[rs.checklistEffect()]
	if st == nil || !ok || rs.streamDone {
		return nil
	}
	u, ok := rs.updates[rs.checklistEffect()]
	if !ok {
		return nil
	}
	if err := d.e.mayAct(ctx); err != nil {
		return fmt.Errorf("re-issue stream update: %w", err)
	}
	err := d.performStream(ctx, st, ref, rs.Status, core.EffectID(u.ch, u.seq, 0))
	if err == nil || errors.Is(err, core.ErrStreamEnded) {
		return nil
	}
	return d.e.cosmetic(ctx, &editError{effect: rs.checklistEffect(), err: err})
}

// streamState renders rs, as if in status st, as a stream's plan: the
// checklist's header as its title, then one task per plan item and one
// per tool step (update_checklist is the plan itself, not a task).
func streamState(rs *RunReplay, st core.RunStatus) core.StreamUpdate {
	saved := rs.Status
	rs.Status = st
	defer func() { rs.Status = saved }()
	u := core.StreamUpdate{Title: checklistHeader(rs)}
	failed := st == core.RunBroken || st == core.RunCancelled
	for i, it := range rs.plan {
		s := core.TaskPending
		if it.Done || st == core.RunDone {
			s = core.TaskComplete
		}
		u.Tasks = append(u.Tasks, core.StreamTask{ID: fmt.Sprintf("plan-%d", i), Title: core.Truncate(it.Text, 120), Status: s})
	}
	for i, t := range rs.trail {
		if t.tool == "update_checklist" {
			continue
		}
		task := core.StreamTask{ID: taskID(t.call, i), Title: toolLabel(t.tool), Status: core.TaskComplete}
		switch {
		case t.label != "":
			task.Title = t.label
		case !t.ok:
			task.Status, task.Output = core.TaskError, t.code
		}
		u.Tasks = append(u.Tasks, task)
	}
	if step := rs.step; step != nil && !step.final {
		for _, c := range step.calls {
			if c.completed || c.call.Name == "update_checklist" {
				continue
			}
			task := core.StreamTask{ID: taskID(c.call.ID, -1), Title: toolLabel(c.call.Name), Status: core.TaskInProgress}
			switch {
			case failed:
				task.Status = core.TaskError
			case c.approval != "" && st == core.RunWaitingApproval:
				task.Output = "waiting for approval"
			}
			u.Tasks = append(u.Tasks, task)
		}
	}
	return u
}

func taskID(call string, i int) string {
	if call != "" {
		return "call-" + call
	}
	return fmt.Sprintf("step-%d", i)
}
