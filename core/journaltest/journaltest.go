// Package journaltest is the conformance suite every core.Journal
// implementation passes, plus benchmark helpers shared by the stores.
//
// A store's test calls Run with a function that opens a fresh, empty journal
// (and the store-specific hooks in Harness); each subtest gets its own.
package journaltest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// Harness is one fresh, empty journal under test, with the hooks the suite
// cannot express through core.Journal.
type Harness struct {
	Journal core.Journal
	// Reopen opens another, independent instance on the same database with
	// its own connections (what a second process is) that seals with
	// signer; with a nil signer, a read-only instance (core.ErrReadOnly).
	// The implementation closes it on t's cleanup.
	Reopen func(t *testing.T, signer *core.Signer) core.Journal
	// Tamper edits the stored rows behind the journal's back, in the
	// store's own SQL, as an attacker with database access would.
	Tamper Tamper
}

// Tamper is what an attacker with write access to the database can do. Each
// operation acts on one stored command row of channel ch and must not touch
// the channel's head record.
type Tamper interface {
	// FlipPayloadByte inverts the bits of byte i of the stored payload;
	// i < 0 counts from the end (-1 is the last byte).
	FlipPayloadByte(ctx context.Context, ch core.ChannelKey, seq uint64, i int) error
	// FlipSigByte inverts the bits of byte i of the stored signature.
	FlipSigByte(ctx context.Context, ch core.ChannelKey, seq uint64, i int) error
	// SetActorID rewrites the actor id (an attempt to re-attribute).
	SetActorID(ctx context.Context, ch core.ChannelKey, seq uint64, id string) error
	// Delete removes the row.
	Delete(ctx context.Context, ch core.ChannelKey, seq uint64) error
	// SwapSeq exchanges the seq of two rows (a reordering).
	SwapSeq(ctx context.Context, ch core.ChannelKey, a, b uint64) error
	// StoredPayload returns the payload column as stored (nil when NULL),
	// to check that a redaction really destroyed the bytes.
	StoredPayload(ctx context.Context, ch core.ChannelKey, seq uint64) ([]byte, error)
	// MarkRedacted sets the payload to NULL and the redacted flag, as
	// Redact does, but appends no command.redacted: a silent deletion.
	MarkRedacted(ctx context.Context, ch core.ChannelKey, seq uint64) error
	// SetKeyID rewrites the stored signing key id.
	SetKeyID(ctx context.Context, ch core.ChannelKey, seq uint64, id string) error
}

// NewSigner returns a signer with a fresh random key.
func NewSigner(tb testing.TB) *core.Signer {
	tb.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatalf("generate key: %v", err)
	}
	s, err := core.NewSigner(key)
	if err != nil {
		tb.Fatalf("new signer: %v", err)
	}
	return s
}

// Run runs the conformance suite. open is called once per subtest and must
// return an empty journal that is closed (and its database removed) on t's
// cleanup. Subtests run one after another: each holds its own connections.
func Run(t *testing.T, open func(t *testing.T, signer *core.Signer) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f *fixture)
	}{
		{"Empty", testEmpty},
		{"AppendAndRead", testAppendAndRead},
		{"RoundTrip", testRoundTrip},
		{"Batch", testBatch},
		{"BatchMixedChannels", testBatchMixedChannels},
		{"BatchFailsMidway", testBatchFailsMidway},
		{"BadBatches", testBadBatches},
		{"CancelledContext", testCancelledContext},
		{"Verify", testVerify},
		{"VerifyPages", testVerifyPages},
		{"ForeignSignature", testForeignSignature},
		{"ConcurrentOneChannel", testConcurrentOneChannel},
		{"ConcurrentChannels", testConcurrentChannels},
		{"TwoInstances", testTwoInstances},
		{"Tamper", testTamper},
		{"Redact", testRedact},
		{"Restate", testRestate},
		{"RedactRejects", testRedactRejects},
		{"RedactBatch", testRedactBatch},
		{"MessagesBy", testMessagesBy},
		{"ReadRun", testReadRun},
		{"Channels", testChannels},
		{"Head", testHead},
		{"Decode", testDecode},
		{"SilentRedaction", testSilentRedaction},
		{"RedactionRecordStays", testRedactionRecordStays},
		{"KeyID", testKeyID},
		{"KeyRotation", testKeyRotation},
		{"KeyTamper", testKeyTamper},
		{"NewestSigners", testNewestSigners},
		{"ReadOnly", testReadOnly},
		{"AppendAtHead", testAppendAtHead},
		{"AppendAtRace", testAppendAtRace},
		{"AppendAtFence", testAppendAtFence},
		{"Leases", testLeases},
		{"Tail", testTail},
		{"ItemChannels", testItemChannels},
		{"LatestOfKind", testLatestOfKind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			signer := NewSigner(t)
			h := open(t, signer)
			if h.Journal == nil || h.Reopen == nil || h.Tamper == nil {
				t.Fatal("journaltest: open returned an incomplete Harness")
			}
			tc.fn(t, newFixture(t, h, signer))
		})
	}
}
