package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/marlowe-bot/marlowe/core"
)

// Tracing configures the run's OpenTelemetry spans. The zero value makes
// none (a no-op tracer: no allocation, no export).
type Tracing struct {
	// Provider makes the engine's tracer (nil: no spans).
	Provider trace.TracerProvider
	// Content lets message text, prompts, model output, tool arguments and
	// results become span attributes (MARLOWE_TRACE_CONTENT=1). Off, no
	// span carries any of them.
	Content bool
	// Model is the configured model's name, gen_ai.request.model.
	Model string
}

// Span and attribute names. docs/operations.md lists them; a trace leads
// to `bot replay --run <marlowe.run.id>` (the trace id is the run's ULID).
const (
	spanIngress = "marlowe.ingress"
	spanClick   = "marlowe.click"
	spanDrive   = "marlowe.run"
	spanPost    = "marlowe.post"
	spanEdit    = "marlowe.edit"
	spanAppend  = "marlowe.journal.append"

	attrRunID        = "marlowe.run.id"
	attrSeq          = "marlowe.journal.seq"
	attrSeqLast      = "marlowe.journal.seq_last"
	attrKinds        = "marlowe.journal.kinds"
	attrPlatform     = "marlowe.platform"
	attrChannel      = "marlowe.channel"
	attrChannelKind  = "marlowe.channel.kind"
	attrRouteReason  = "marlowe.route.reason"
	attrOutcome      = "marlowe.ingress.outcome"
	attrResumed      = "marlowe.run.resumed"
	attrStatus       = "marlowe.run.status"
	attrAttempt      = "marlowe.model.attempt"
	attrStreaming    = "marlowe.model.streaming"
	attrConsequence  = "marlowe.tool.consequence"
	attrVerdict      = "marlowe.gate.verdict"
	attrPostRole     = "marlowe.post.role"
	attrPostMethod   = "marlowe.post.method"
	attrApprovalWait = "marlowe.approval.wait_seconds"
	attrDecision     = "marlowe.approval.decision"
	attrText         = "marlowe.message.text" // content: only with Tracing.Content

	attrGenOp         = "gen_ai.operation.name"
	attrGenProvider   = "gen_ai.provider.name"
	attrGenReqModel   = "gen_ai.request.model"
	attrGenRespModel  = "gen_ai.response.model"
	attrGenIn         = "gen_ai.usage.input_tokens"
	attrGenOut        = "gen_ai.usage.output_tokens"
	attrGenFinish     = "gen_ai.response.finish_reasons"
	attrGenToolName   = "gen_ai.tool.name"
	attrGenToolCallID = "gen_ai.tool.call.id"
	attrGenToolArgs   = "gen_ai.tool.call.arguments" // content
	attrGenToolResult = "gen_ai.tool.call.result"    // content
	attrGenOutput     = "gen_ai.output.messages"     // content
	attrGenSystem     = "gen_ai.system_instructions" // content
	attrGenInput      = "gen_ai.input.messages"      // content
	attrErrorType     = "error.type"
)

// tracer is the engine's tracer; traced reports whether spans are made at
// all, so the hooks skip building attributes when they would go nowhere.
func newTracer(t Tracing) (trace.Tracer, bool) {
	if t.Provider == nil {
		return noop.NewTracerProvider().Tracer(""), false
	}
	return t.Provider.Tracer("github.com/marlowe-bot/marlowe/engine"), true
}

// spanOpts are made once, not per span: a span's name and options built
// at each call cost allocations even for a span that is not sampled.
type spanOpts struct {
	chat             string // the model call span's name, "chat <model>"
	client, internal []trace.SpanStartOption
}

func newSpanOpts(t Tracing) spanOpts {
	return spanOpts{
		chat:     "chat " + t.Model,
		client:   []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
		internal: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
	}
}

// unsampled reports whether ctx holds a span that is not sampled. Its
// children are not sampled either under every sampler the bot configures
// (a parent-based one follows the parent; a trace id ratio decides on the
// trace id, which they share; always_on samples every parent), so the
// hooks start none: the SDK would make a span and a context for nothing.
// ctx keeps the parent, so an HTTP call under it still carries its
// traceparent, marked not sampled.
func unsampled(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}

// noSpan is the span the hooks return when they start none (a no-op).
func noSpan() trace.Span { return trace.SpanFromContext(context.Background()) }

// RunTraceID is the trace id of a run: the 16 bytes of its ULID (so the
// trace id, read as a ULID, is the run id), or for an id that is not a
// ULID the first 16 bytes of its sha256.
func RunTraceID(runID string) trace.TraceID {
	if u, err := ulid.ParseStrict(runID); err == nil {
		return trace.TraceID(u)
	}
	sum := sha256.Sum256([]byte(runID))
	var t trace.TraceID
	copy(t[:], sum[:16])
	return t
}

// RunOfTrace is the run id a trace id stands for, when the run id is a
// ULID (every run the boundary mints).
func RunOfTrace(t trace.TraceID) string { return ulid.ULID(t).String() }

// runSpan starts a root span in the run's trace: a span context holding
// only a trace id asks the bot's ID generator (internal/telemetry) for
// that trace, so every piece of one run's work, on any replica and after
// any restart, lands in one trace with nothing shared between processes.
func (e *Engine) runSpan(ctx context.Context, runID, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !e.traced {
		return ctx, noSpan()
	}
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: RunTraceID(runID)}))
	ctx, span := e.tr.Start(ctx, name, opts...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrRunID, runID))
	}
	return ctx, span
}

// traceIngress records a routed message's ingress as a span in the trace
// of the run it started, steered or cancelled: platform, channel kind and
// route reason, never the text (unless content tracing is on). Ignored
// messages make no span: they leave no trace of any kind.
func (e *Engine) traceIngress(ctx context.Context, began time.Time, ev *core.Event, reason, run, outcome string, cmds []core.Command) {
	if !e.traced || run == "" {
		return
	}
	_, span := e.runSpan(ctx, run, spanIngress, trace.WithTimestamp(began), trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	if !span.IsRecording() {
		return // not sampled: build nothing
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrPlatform, ev.Scope.Platform),
		attribute.String(attrChannel, string(ev.Scope.Key())),
		attribute.String(attrChannelKind, string(ev.Visibility)),
		attribute.String(attrRouteReason, reason),
		attribute.String(attrOutcome, outcome),
	}
	for _, c := range cmds {
		if c.Kind() == core.KindMessageReceived {
			attrs = append(attrs, attribute.Int64(attrSeq, int64(c.Seq())))
		}
	}
	if e.cfg.Tracing.Content {
		attrs = append(attrs, attribute.String(attrText, ev.Text))
	}
	span.SetAttributes(attrs...)
}

// inTrace reports whether ctx holds a span of a run's trace: only runSpan
// starts roots, so work outside a run (the ingress's own append, which
// its span records by seq, a notice) makes no stray one-span traces.
func inTrace(ctx context.Context) bool {
	return trace.SpanFromContext(ctx).SpanContext().IsValid()
}

// traceClick records a click on an approval card as a span in the trace of
// the run that asked: outcome (accepted, refused, expired), decision and
// the seq of its card.clicked. Who clicked is not on it.
func (e *Engine) traceClick(ctx context.Context, began time.Time, sc core.Scope, run, approval, outcome, decision string, cmds []core.Command) {
	if !e.traced || run == "" {
		return
	}
	_, span := e.runSpan(ctx, run, spanClick, trace.WithTimestamp(began), trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrPlatform, sc.Platform),
		attribute.String(attrChannel, string(sc.Key())),
		attribute.String("marlowe.approval.id", approval),
		attribute.String(attrOutcome, outcome),
		attribute.String(attrDecision, decision),
	}
	for _, c := range cmds {
		if c.Kind() == core.KindCardClicked {
			attrs = append(attrs, attribute.Int64(attrSeq, int64(c.Seq())))
		}
	}
	span.SetAttributes(attrs...)
}

// endSpan marks a failed span and ends it. An error's text is content (a
// tool's error may quote its arguments, a provider's the prompt): without
// the opt-in a failed span carries status Error and error.type, a class
// (errorType), never the message.
func endSpan(span trace.Span, err error, content bool, class string) {
	if err != nil {
		span.SetAttributes(attribute.String(attrErrorType, errorType(err, class)))
		desc := "failed"
		if content {
			desc = err.Error()
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End()
}

// errorType classifies err without its text; class is the fallback.
func errorType(err error, class string) string {
	if me, ok := core.AsModelError(err); ok {
		return string(me.Failure)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, core.ErrHeadMoved):
		return "head_moved"
	case errors.Is(err, core.ErrFenced):
		return "fenced"
	}
	return class
}

// modelSpan starts one model call attempt's GenAI client span.
func (d *driver) modelSpan(ctx context.Context, v core.View, runID string, attempt int) (context.Context, trace.Span) {
	e := d.e
	if !e.traced || unsampled(ctx) {
		return ctx, noSpan()
	}
	ctx, span := e.tr.Start(ctx, e.so.chat, e.so.client...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrGenOp, "chat"),
		attribute.String(attrGenReqModel, e.cfg.Tracing.Model),
		attribute.Int(attrAttempt, attempt),
		// The engine asks for whole steps: an answer is shown only once its
		// step is journaled (streamAnswer streams it then), never while the
		// model writes.
		attribute.Bool(attrStreaming, false),
		attribute.String(attrRunID, runID),
	}
	if e.cfg.Tracing.Content {
		attrs = append(attrs, attribute.String(attrGenSystem, v.System), attribute.String(attrGenInput, messagesText(v.Messages)))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endModelSpan sets what the reply says (the finish reason is derived:
// tool_calls when the reply asks for tools, else stop) and ends the span.
func (d *driver) endModelSpan(span trace.Span, r core.Reply, err error) {
	if !d.e.traced {
		return
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		endSpan(span, err, d.e.cfg.Tracing.Content, "other")
		return
	}
	finish := "stop"
	if len(r.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	span.SetAttributes(
		attribute.String(attrGenProvider, r.Provider),
		attribute.String(attrGenRespModel, r.Model),
		attribute.Int(attrGenIn, r.Usage.InputTokens),
		attribute.Int(attrGenOut, r.Usage.OutputTokens),
		attribute.StringSlice(attrGenFinish, []string{finish}),
	)
	if d.e.cfg.Tracing.Content {
		span.SetAttributes(attribute.String(attrGenOutput, r.Text))
	}
	span.End()
}

func messagesText(ms []core.Message) string {
	var n int
	for _, m := range ms {
		n += len(m.Text) + len(m.Role) + 2
	}
	b := make([]byte, 0, n)
	for _, m := range ms {
		b = append(b, m.Role...)
		b = append(b, ": "...)
		b = append(b, m.Text...)
		b = append(b, '\n')
	}
	return string(b)
}

// toolSpan starts the span of one tool call's execution: every tool the
// engine runs, built-in or from a connector, gets one here (its own HTTP
// calls are children of it).
func (d *driver) toolSpan(ctx context.Context, tool core.Tool, cs *callState, verdict string, args []byte) (context.Context, trace.Span) {
	if !d.e.traced || unsampled(ctx) {
		return ctx, noSpan()
	}
	ctx, span := d.e.tr.Start(ctx, "execute_tool "+tool.Name, d.e.so.internal...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrGenOp, "execute_tool"),
		attribute.String(attrGenToolName, tool.Name),
		attribute.String(attrGenToolCallID, cs.call.ID),
		attribute.String(attrConsequence, string(tool.Consequence)),
		attribute.String(attrVerdict, verdict),
		attribute.String(attrRunID, d.rs.ID),
		attribute.Int64(attrSeq, int64(cs.reqSeq)),
	}
	if d.e.cfg.Tracing.Content {
		attrs = append(attrs, attribute.String(attrGenToolArgs, string(args)))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

func (d *driver) endToolSpan(span trace.Span, obs core.Observation, err error) {
	if !d.e.traced {
		return
	}
	if err == nil && d.e.cfg.Tracing.Content && span.IsRecording() {
		span.SetAttributes(attribute.String(attrGenToolResult, obs.Text))
	}
	endSpan(span, err, d.e.cfg.Tracing.Content, "tool_error")
}

// gateEvent notes on the drive's span a gate verdict that ran nothing
// (deny) or asked first (ask): tool, consequence, verdict.
func (d *driver) gateEvent(ctx context.Context, tool core.Tool, verdict string) {
	if !d.e.traced || !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	trace.SpanFromContext(ctx).AddEvent("marlowe.gate", trace.WithAttributes(
		attribute.String(attrGenToolName, tool.Name),
		attribute.String(attrConsequence, string(tool.Consequence)),
		attribute.String(attrVerdict, verdict),
	))
}

// approvalEvent notes an approval's request or resolution on the drive's
// span; a resolution carries how long the card waited.
func (d *driver) approvalEvent(ctx context.Context, name string, a *runApproval) {
	if !d.e.traced || a == nil || a.req == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("marlowe.approval.id", a.req.ApprovalID),
		attribute.String(attrGenToolName, a.req.Tool),
		attribute.Int64(attrSeq, int64(a.seq)),
	}
	if a.res != nil {
		attrs = append(attrs, attribute.String(attrDecision, a.res.Decision), attribute.Int64(attrSeqLast, int64(a.resSeq)))
		if !a.reqAt.IsZero() && !a.resAt.IsZero() {
			attrs = append(attrs, attribute.Float64(attrApprovalWait, a.resAt.Sub(a.reqAt).Seconds()))
		}
	}
	trace.SpanFromContext(ctx).AddEvent(name, trace.WithAttributes(attrs...))
}

// postSpan starts the span of one platform write (a post or an edit).
func (e *Engine) postSpan(ctx context.Context, name string, out core.Outbound, role, method string) (context.Context, trace.Span) {
	if !e.traced || !inTrace(ctx) || unsampled(ctx) {
		return ctx, noSpan()
	}
	ctx, span := e.tr.Start(ctx, name, e.so.client...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrPlatform, out.Scope.Platform),
		attribute.String(attrChannel, string(out.Scope.Key())),
		attribute.String(attrPostRole, role),
		attribute.String(attrPostMethod, method),
	}
	if e.cfg.Tracing.Content {
		attrs = append(attrs, attribute.String(attrText, out.Text))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// appendEvent notes one journal append on the span it happened under
// (a drive's, a post's): kinds, the seqs it got, how long it took, and an
// error class if it failed. An event, not a span: a run makes a dozen
// appends, and events cost a fraction of a span (BenchmarkRunTracing).
func (v *chanView) appendEvent(ctx context.Context, began time.Time, attempt int, drafts []core.Draft, cmds []core.Command, err error) {
	if !v.traced {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kinds := make([]string, len(drafts))
	for i, d := range drafts {
		kinds[i] = d.Kind().String()
	}
	attrs := []attribute.KeyValue{
		attribute.StringSlice(attrKinds, kinds),
		attribute.Int("marlowe.journal.attempt", attempt),
		attribute.Float64("marlowe.journal.append_ms", float64(time.Since(began).Microseconds())/1000),
	}
	if len(cmds) > 0 {
		attrs = append(attrs, attribute.Int64(attrSeq, int64(cmds[0].Seq())), attribute.Int64(attrSeqLast, int64(cmds[len(cmds)-1].Seq())))
	}
	if err != nil {
		attrs = append(attrs, attribute.String(attrErrorType, errorType(err, "journal_error")))
	}
	span.AddEvent(spanAppend, trace.WithAttributes(attrs...))
}

func ingressOutcome(started, steered, cancelled bool) string {
	switch {
	case started:
		return "started"
	case steered:
		return "steered"
	case cancelled:
		return "cancelled"
	}
	return "other"
}

// verdictOf is the gate verdict a call runs under: allow, or approved
// when a person approved its card.
func verdictOf(cs *callState) string {
	if cs.approval != "" {
		return "approved"
	}
	return string(cs.decision)
}

// post is postOnce in a span: method says how the surface sends it
// (post, attempted: journaled attempt first, stream), and the surface's
// pacer notes each rate-limit refusal it waits out on the same span.
func (e *Engine) post(ctx context.Context, s core.Surface, rs *RunReplay, out core.Outbound, rec postRecord) (core.MessageRef, error) {
	if !e.traced {
		return e.postOnce(ctx, s, rs, out, rec)
	}
	if rs != nil {
		if ref, ok := rs.Effects[out.Key]; ok {
			return ref, nil // posted already: no platform call, no span
		}
	}
	method := "post"
	if rec.send != nil {
		method = "stream"
	} else if _, ok := s.(core.AttemptedPoster); ok && out.Key != "" {
		method = "attempted"
	}
	ctx, span := e.postSpan(ctx, spanPost, out, rec.role, method)
	if rec.run != "" && span.IsRecording() {
		span.SetAttributes(attribute.String(attrRunID, rec.run))
	}
	ref, err := e.postOnce(ctx, s, rs, out, rec)
	endSpan(span, err, e.cfg.Tracing.Content, "post_error")
	return ref, err
}

// journalEdit is journalEditOnce in a span.
func (e *Engine) journalEdit(ctx context.Context, rs *RunReplay, effect string, ref core.MessageRef, text string, perform func(ctx context.Context, key string) error) error {
	if !e.traced {
		return e.journalEditOnce(ctx, rs, effect, ref, text, perform)
	}
	ctx, span := e.postSpan(ctx, spanEdit, core.Outbound{Scope: ref.Scope, Text: text}, "edit", "update")
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrRunID, rs.ID))
	}
	err := e.journalEditOnce(ctx, rs, effect, ref, text, perform)
	endSpan(span, err, e.cfg.Tracing.Content, "edit_error")
	return err
}
