package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// TestMessagesByUsesTheIndex: in a journal of 4,000 messages, 40 of them
// Ann's, her messages are found through the author index of migration
// 00014, in its order: no scan of the journal, no sort.
func TestMessagesByUsesTheIndex(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.New(t), coretest.NewSigner(t))
	ctx := t.Context()
	b := core.NewBoundary(nil)
	for c := range 4 {
		sc := core.Scope{Platform: "test", Workspace: "w", Channel: fmt.Sprintf("C%d", c)}
		var drafts []core.Draft
		for i := range 1000 {
			p := core.Person{ID: "UBOB"}
			if i%100 == 0 {
				p = core.Person{ID: "UANN"}
			}
			d, err := b.Human(p, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("m%d-%d", c, i), Author: p, Visibility: core.Public, Text: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			drafts = append(drafts, d)
		}
		if _, err := s.Append(ctx, drafts...); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.MessagesBy(ctx, "test", "UANN"); err != nil || len(got) != 40 {
		t.Fatalf("messages by Ann: %d %v, want 40", len(got), err)
	}
	plan, err := s.ExplainMessagesByForTest(ctx, "test", "UANN")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "commands_author_idx") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
		t.Fatalf("plan does not use the author index:\n%s", plan)
	}
}
