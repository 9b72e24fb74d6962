package ingest

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	"shindo.dev/lib/telemetry"
	"shindo.dev/svc-ingest/internal/verify"
)

// packetSampler picks the station packets that are traced. A station sends
// no trace context, so a packet's trace starts here, with a span from its
// receipt to its ack; the record carries the span's context through the
// journal to svc-rts, whose tick joins the trace, and on to the edges.
//
// This is the hot path — every datagram of every station — so the choice
// is made before any span exists: one accepted intensity packet in every
// (a counter, not the tracer's sampler, which would need a span started
// for each packet to decide). Only intensity packets are picked, since
// they are the ones that reach RTS and the edges; sensor packets go to the
// waveform archive, whose hop is not traced.
type packetSampler struct {
	every  uint64
	n      atomic.Uint64
	tracer trace.Tracer
}

func newPacketSampler(every uint64) *packetSampler {
	return &packetSampler{every: every, tracer: telemetry.Tracer("shindo.dev/svc-ingest")}
}

// start returns the span of the accepted packet o if it is one to trace,
// with the trace context its record carries; a nil span and no context
// otherwise.
func (ps *packetSampler) start(o *verify.Outcome, tr ingestv1.Transport) (trace.Span, map[string]string) {
	if ps == nil || ps.every == 0 || o.Packet.GetIntensity() == nil || ps.n.Add(1)%ps.every != 0 {
		return nil, nil
	}
	ctx, span := ps.tracer.Start(context.Background(), "ingest packet",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(o.RecvAt),
		trace.WithAttributes(
			attribute.String("shindo.station", o.Packet.GetStationId()),
			attribute.Int64("shindo.seq", int64(o.Packet.GetSeq())),
			attribute.String("shindo.transport", tr.String()),
		))
	return span, telemetry.Inject(ctx)
}

// tracedPacket is a traced packet of a batch: its index and its span.
type tracedPacket struct {
	i    int
	span trace.Span
}

// end closes the spans of a batch's traced packets once their fate is
// known: recorded and acked, or refused.
func endTraced(traced []tracedPacket, outs []verify.Outcome) {
	for _, tp := range traced {
		r := outs[tp.i].Result
		tp.span.SetAttributes(attribute.String("shindo.result", r.String()))
		if r != verify.Accepted {
			tp.span.SetStatus(codes.Error, "not recorded")
		}
		tp.span.End()
	}
}
