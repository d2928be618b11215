package journaltest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// redact redacts seq of ch through the journal, with a proper record.
func (f *fixture) redact(j core.Journal, ch string, seq uint64) core.Command {
	f.t.Helper()
	target := f.read(key(ch), seq, 1)
	if len(target) != 1 {
		f.t.Fatalf("redact %s seq %d: not found", ch, seq)
	}
	rec, err := f.bd.System("operator", scope(ch), core.Meta{Cause: target[0].ID()},
		&core.CommandRedacted{Seq: seq, ID: target[0].ID(), Reason: "user asked to delete"})
	if err != nil {
		f.t.Fatal(err)
	}
	got, err := j.Redact(f.t.Context(), seq, rec)
	if err != nil {
		f.t.Fatalf("redact %s seq %d: %v", ch, seq, err)
	}
	return got
}

// testSilentRedaction: the redacted flag is not signed, so a row marked
// redacted is valid only with a later signed command.redacted naming it.
// Marking one in SQL without that record must fail verification at its seq.
func testSilentRedaction(t *testing.T, f *fixture) {
	const n = 8
	ctx := t.Context()
	cases := []struct {
		name   string
		legit  []uint64 // redacted through Journal.Redact first
		silent []uint64 // then marked redacted behind the journal's back
		seq    uint64   // first bad seq; 0: the channel verifies
	}{
		{"Legitimate", []uint64{3}, nil, 0},
		{"LegitimateTwice", []uint64{2, n}, nil, 0},
		{"Silent", nil, []uint64{4}, 4},
		{"SilentFirst", nil, []uint64{1}, 1},
		{"SilentHead", nil, []uint64{n}, n},
		{"SilentTwo", nil, []uint64{7, 3}, 3},
		{"SilentAfterLegitimate", []uint64{3}, []uint64{5}, 5},
		{"SilentBeforeLegitimate", []uint64{6}, []uint64{2}, 2},
		// Destroying the record itself leaves its target unaccounted for.
		{"SilentRecord", []uint64{2}, []uint64{n + 1}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "sr-" + strings.ToLower(tc.name)
			ch := key(name)
			f.fill(name, n)
			for _, seq := range tc.legit {
				f.redact(f.j, name, seq)
			}
			total := n + len(tc.legit)
			f.verify(ch, total)
			for _, seq := range tc.silent {
				if err := f.h.Tamper.MarkRedacted(ctx, ch, seq); err != nil {
					t.Fatalf("tamper: %v", err)
				}
				if p, err := f.h.Tamper.StoredPayload(ctx, ch, seq); err != nil || p != nil {
					t.Fatalf("tamper left payload %q (%v)", p, err)
				}
			}
			_, err := core.VerifyChannel(ctx, f.j, f.v, ch)
			if tc.seq == 0 {
				if err != nil {
					t.Fatalf("verify after legitimate redaction: %v", err)
				}
				return
			}
			wantChainError(t, err, ch, tc.seq, "redacted")
			if _, err := core.VerifyAll(ctx, f.j, f.v); err == nil {
				t.Fatal("verify all passed a silent redaction")
			}
		})
	}
}

// testRedactionRecordStays: a command.redacted record cannot itself be
// redacted, since it is what accounts for its target's missing payload.
func testRedactionRecordStays(t *testing.T, f *fixture) {
	ch := key("rs")
	f.fill("rs", 2)
	rec := f.redact(f.j, "rs", 1)
	d, err := f.bd.System("operator", scope("rs"), core.Meta{}, &core.CommandRedacted{Seq: rec.Seq(), ID: rec.ID(), Reason: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.j.Redact(t.Context(), rec.Seq(), d); err == nil {
		t.Fatal("redacting a command.redacted record: no error")
	}
	if seq, _ := f.head(ch); seq != 3 {
		t.Fatalf("refused redaction moved the head to %d", seq)
	}
	f.verify(ch, 3)
}

// testKeyID: every command names the key that signed it, and the store
// keeps that name.
func testKeyID(t *testing.T, f *fixture) {
	want := f.s.KeyID()
	if len(want) != core.KeyIDLen || want != core.KeyID(f.s.Public()) {
		t.Fatalf("signer key id %q, want %d hex digits of sha256(public key)", want, core.KeyIDLen)
	}
	appended := f.append(f.msgs("kid", 3)...)
	for _, c := range append(appended, f.read(key("kid"), 1, 0)...) {
		if c.Key() != want {
			t.Fatalf("seq %d names key %q, want %q", c.Seq(), c.Key(), want)
		}
	}
	sameCommands(t, f.read(key("kid"), 1, 0), appended)
}

// untrustedKey checks err is a chain error at seq naming key id as
// untrusted.
func untrustedKey(tb testing.TB, err error, ch core.ChannelKey, seq uint64, id string) {
	tb.Helper()
	wantChainError(tb, err, ch, seq, id)
	var uk *core.UntrustedKeyError
	if !errors.As(err, &uk) || uk.Key != id {
		tb.Fatalf("error %v, want an *core.UntrustedKeyError naming %s", err, id)
	}
}

// testKeyRotation: half a channel signed with one key, half with the next.
// Each key alone fails at the first row of the other half, naming its key;
// trusting both (the old one as a retired public key) verifies it all.
func testKeyRotation(t *testing.T, f *fixture) {
	ctx := t.Context()
	ch := key("rot")
	old := f.s
	f.fill("rot", 3)
	next := NewSigner(t)
	rotated := f.h.Reopen(t, next)
	for i := range 3 {
		if _, err := rotated.Append(ctx, f.msg("rot", fmt.Sprintf("after %d", i))); err != nil {
			t.Fatalf("append with the new key: %v", err)
		}
	}
	// A redaction after the rotation, of a row signed with the old key.
	f.redact(rotated, "rot", 2)
	for _, c := range f.read(ch, 1, 0) {
		if want := map[bool]string{true: old.KeyID(), false: next.KeyID()}[c.Seq() <= 3]; c.Key() != want {
			t.Fatalf("seq %d names key %s, want %s", c.Seq(), c.Key(), want)
		}
	}
	_, err := core.VerifyChannel(ctx, f.j, next.Verifier(), ch)
	untrustedKey(t, err, ch, 1, old.KeyID())
	_, err = core.VerifyChannel(ctx, f.j, old.Verifier(), ch)
	untrustedKey(t, err, ch, 4, next.KeyID())
	both, err := core.NewVerifier(next.Public(), old.Public())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := core.VerifyChannel(ctx, f.j, both, ch); err != nil || n != 7 {
		t.Fatalf("verify with both keys: %d %v, want 7 nil", n, err)
	}
	if n, err := core.VerifyAll(ctx, rotated, both); err != nil || n != 7 {
		t.Fatalf("verify all with both keys: %d %v, want 7 nil", n, err)
	}
}

// testKeyTamper edits the stored key id: clearing it (posing as a row from
// before key ids) or pointing it at another trusted key breaks the
// signature, since the id is signed.
func testKeyTamper(t *testing.T, f *fixture) {
	ctx := t.Context()
	other := NewSigner(t)
	both, err := core.NewVerifier(f.s.Public(), other.Public())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, id string
		reason   string
	}{
		{"Cleared", "", "signature"},
		{"OtherTrustedKey", other.KeyID(), "signature"},
		{"Unknown", "ffffffffffffffff", "ffffffffffffffff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "kt-" + strings.ToLower(tc.name)
			ch := key(name)
			f.fill(name, 4)
			if err := f.h.Tamper.SetKeyID(ctx, ch, 3, tc.id); err != nil {
				t.Fatalf("tamper: %v", err)
			}
			_, err := core.VerifyChannel(ctx, f.j, both, ch)
			wantChainError(t, err, ch, 3, tc.reason)
		})
	}
}

// testNewestSigners: the start-up check looks at each channel's newest
// command only and names the channels whose signer is not trusted.
func testNewestSigners(t *testing.T, f *fixture) {
	ctx := t.Context()
	if got, err := core.CheckNewestSigners(ctx, f.j, f.v); err != nil || len(got) != 0 {
		t.Fatalf("empty journal: %v %v", got, err)
	}
	other := NewSigner(t)
	second := f.h.Reopen(t, other)
	f.fill("ns-a", 3)
	f.fill("ns-b", 2)
	if _, err := second.Append(ctx, f.msg("ns-b", "by the other key")); err != nil {
		t.Fatal(err)
	}
	// Older rows by another key do not count: only the newest is checked.
	if _, err := second.Append(ctx, f.msg("ns-c", "old")); err != nil {
		t.Fatal(err)
	}
	f.fill("ns-c", 1)

	got, err := core.CheckNewestSigners(ctx, f.j, f.v)
	want := []core.SignerProblem{{Channel: key("ns-b"), Seq: 3, Key: other.KeyID()}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("check with the first key: %v %v, want %v", got, err, want)
	}
	got, err = core.CheckNewestSigners(ctx, f.j, other.Verifier())
	want = []core.SignerProblem{{Channel: key("ns-a"), Seq: 3, Key: f.s.KeyID()}, {Channel: key("ns-c"), Seq: 2, Key: f.s.KeyID()}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("check with the other key: %v %v, want %v", got, err, want)
	}
	both, err := core.NewVerifier(f.s.Public(), other.Public())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := core.CheckNewestSigners(ctx, f.j, both); err != nil || len(got) != 0 {
		t.Fatalf("check with both keys: %v %v", got, err)
	}
}

// testReadOnly: an instance opened without a signing key reads and
// verifies with public keys alone and refuses to write.
func testReadOnly(t *testing.T, f *fixture) {
	ctx := t.Context()
	ch := key("ro")
	want := f.fill("ro", 3)
	ro := f.h.Reopen(t, nil)
	got, err := ro.Read(ctx, ch, 1, 0)
	if err != nil {
		t.Fatalf("read-only read: %v", err)
	}
	sameCommands(t, got, want)
	pub, err := core.NewVerifier(f.s.Public())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := core.VerifyAll(ctx, ro, pub); err != nil || n != 3 {
		t.Fatalf("read-only verify: %d %v", n, err)
	}
	if _, err := ro.Append(ctx, f.msg("ro", "no key")); !errors.Is(err, core.ErrReadOnly) {
		t.Fatalf("read-only append: %v, want core.ErrReadOnly", err)
	}
	rec, err := f.bd.System("operator", scope("ro"), core.Meta{}, &core.CommandRedacted{Seq: 1, ID: want[0].ID(), Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Redact(ctx, 1, rec); !errors.Is(err, core.ErrReadOnly) {
		t.Fatalf("read-only redact: %v, want core.ErrReadOnly", err)
	}
	if seq, _ := f.head(ch); seq != 3 {
		t.Fatalf("read-only instance moved the head to %d", seq)
	}
	f.verify(ch, 3)
}
