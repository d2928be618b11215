package core

import "fmt"

// Kind is the closed set of Command kinds. It is a small integer so that
// switches over it can be checked for exhaustiveness by tests (see
// TestEveryKindIsHandled); its text form is what is stored and signed.
type Kind uint8

const (
	kindInvalid Kind = iota
	KindMessageReceived
	KindCardClicked
	KindRunStarted
	KindModelStep
	KindToolRequested
	KindPermissionDecided
	KindApprovalRequested
	KindApprovalResolved
	KindConsentGranted
	KindConsentRevoked
	KindToolCompleted
	KindMessagePosted
	KindMessageUpdated
	KindMemoryWritten
	KindMemoryForgotten
	KindMemoryRedacted
	KindRoutineCreated
	KindRoutineChanged
	KindRoutineFired
	KindRunPaused
	KindRunCompleted
	KindRunFailed
	KindPolicyChanged
	KindCommandRedacted
	KindReportFiled
	KindReportDismissed
	KindErasureRequested
	KindErasureResolved
	KindMessageAttempted
	KindFoldCheckpoint
	KindConnectionChanged
	kindEnd
)

var kindNames = [kindEnd]string{
	kindInvalid:           "",
	KindMessageReceived:   "message.received",
	KindCardClicked:       "card.clicked",
	KindRunStarted:        "run.started",
	KindModelStep:         "model.step",
	KindToolRequested:     "tool.requested",
	KindPermissionDecided: "permission.decided",
	KindApprovalRequested: "approval.requested",
	KindApprovalResolved:  "approval.resolved",
	KindConsentGranted:    "consent.granted",
	KindConsentRevoked:    "consent.revoked",
	KindToolCompleted:     "tool.completed",
	KindMessagePosted:     "message.posted",
	KindMessageUpdated:    "message.updated",
	KindMemoryWritten:     "memory.written",
	KindMemoryForgotten:   "memory.forgotten",
	KindMemoryRedacted:    "memory.redacted",
	KindRoutineCreated:    "routine.created",
	KindRoutineChanged:    "routine.changed",
	KindRoutineFired:      "routine.fired",
	KindRunPaused:         "run.paused",
	KindRunCompleted:      "run.completed",
	KindRunFailed:         "run.failed",
	KindPolicyChanged:     "policy.changed",
	KindCommandRedacted:   "command.redacted",
	KindReportFiled:       "report.filed",
	KindReportDismissed:   "report.dismissed",
	KindErasureRequested:  "erasure.requested",
	KindErasureResolved:   "erasure.resolved",
	KindMessageAttempted:  "message.attempted",
	KindFoldCheckpoint:    "fold.checkpoint",
	KindConnectionChanged: "connection.changed",
}

// Kinds returns every valid kind, in declaration order.
func Kinds() []Kind {
	out := make([]Kind, 0, kindEnd-1)
	for k := kindInvalid + 1; k < kindEnd; k++ {
		out = append(out, k)
	}
	return out
}

func (k Kind) String() string {
	if k >= kindEnd {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// Valid reports whether k is one of the declared kinds.
func (k Kind) Valid() bool { return k > kindInvalid && k < kindEnd }

// ParseKind maps the stored text form back to a Kind.
func ParseKind(s string) (Kind, error) {
	for k := kindInvalid + 1; k < kindEnd; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return kindInvalid, fmt.Errorf("unknown command kind %q", s)
}

func (k Kind) MarshalText() ([]byte, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("marshal invalid kind %d", uint8(k))
	}
	return []byte(k.String()), nil
}

func (k *Kind) UnmarshalText(b []byte) error {
	p, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}
