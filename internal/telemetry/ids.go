package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// runIDs generates span and trace ids, honouring one convention: a context
// whose span context carries a trace id but no span id (not a valid
// parent) asks for a root span in that trace. The engine starts each piece
// of a run's work (its ingress, every drive, after a restart or on another
// replica too) that way with the run's id as the trace id, so one run is
// one trace without any state shared between processes, and the sampler,
// which sees no parent, takes the same decision for every piece (the trace
// id ratio sampler decides on the trace id alone).
type runIDs struct{}

func newRunIDs() runIDs { return runIDs{} }

func (runIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() && !sc.HasSpanID() {
		return sc.TraceID(), randomSpanID()
	}
	var tid trace.TraceID
	for {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
		if tid.IsValid() {
			return tid, randomSpanID()
		}
	}
}

func (runIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
