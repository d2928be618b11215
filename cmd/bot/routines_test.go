package main

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// The routine caps are read from the environment; a bad value stops
// start-up naming the setting.
func TestRoutineCapsFromTheEnvironment(t *testing.T) {
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if _, err := newScheduler(env(map[string]string{"MARLOWE_ROUTINE_MAX_PER_CHANNEL": "5", "MARLOWE_ROUTINE_MAX_PER_OWNER": "2"}), j, core.NewBoundary(nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]string{{"MARLOWE_ROUTINE_MAX_PER_CHANNEL": "0"}, {"MARLOWE_ROUTINE_MAX_PER_OWNER": "ten"}} {
		_, err := newScheduler(env(bad), j, core.NewBoundary(nil), nil, nil)
		for k := range bad {
			if err == nil || !strings.Contains(err.Error(), k) {
				t.Fatalf("%v: %v", bad, err)
			}
		}
	}
}
