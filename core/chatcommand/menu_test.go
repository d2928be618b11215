package chatcommand_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core/chatcommand"
)

// TestMenuIsTheBareCommands: the menu holds exactly the commands that work
// without an argument, each under a name Telegram accepts, each read by
// the grammar as itself, with a short plain description.
func TestMenuIsTheBareCommands(t *testing.T) {
	var names []string
	valid := regexp.MustCompile(`^[a-z0-9_]{1,32}$`)
	for _, m := range chatcommand.Menu() {
		names = append(names, m.Name)
		if !valid.MatchString(m.Name) {
			t.Errorf("%q is not a valid Telegram command name", m.Name)
		}
		if !chatcommand.Parse(m.Name).Deterministic() && chatcommand.ParseInbox(m.Name).Kind == chatcommand.InboxNone {
			t.Errorf("the grammar does not read the bare %q as a command", m.Name)
		}
		if n := utf8.RuneCountInString(m.Description); n < 3 || n > 100 || strings.ContainsAny(m.Description, "`;(") {
			t.Errorf("%s: description %q is not one short plain line", m.Name, m.Description)
		}
	}
	want := []string{"help", "memories", "status", "approvals", "cancel", "policy", "routines", "inbox", "consents", "connections"}
	if !slices.Equal(names, want) {
		t.Errorf("menu %q, want %q", names, want)
	}
}
