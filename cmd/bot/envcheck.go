package main

import (
	"os"
	"slices"
	"strings"
)

// knownVars are the MARLOWE_ settings the bot reads (.env.example lists
// and explains each; TestEnvExampleListsEveryVariable keeps the three in
// step). Anything else spelled MARLOWE_… is a typo the bot would ignore
// in silence: serve and doctor name it, with the nearest known name.
var knownVars = []string{
	"MARLOWE_ADMINS", "MARLOWE_APPROVAL_TTL", "MARLOWE_ATTACHMENT_MAX_BYTES", "MARLOWE_ATTACHMENT_MAX_COUNT", "MARLOWE_CONFIG", "MARLOWE_DATABASE_URL", "MARLOWE_DATA_DIR",
	"MARLOWE_DISCORD_API_URL", "MARLOWE_DRAIN_TIMEOUT", "MARLOWE_EMBEDDING_BASE_URL", "MARLOWE_EMBEDDING_MODEL",
	"MARLOWE_HTTP_ADDR", "MARLOWE_LEASE_TTL", "MARLOWE_LOG_LEVEL", "MARLOWE_MAX_INPUT_CHARS", "MARLOWE_MCP_CONFIG", "MARLOWE_MODEL",
	"MARLOWE_MODEL_BASE_URL", "MARLOWE_MODEL_BASE_URL_FALLBACK", "MARLOWE_MODEL_FALLBACK", "MARLOWE_MODEL_MAX_RETRIES", "MARLOWE_MODEL_PRICES",
	"MARLOWE_MODEL_PROVIDER", "MARLOWE_MODEL_PROVIDER_FALLBACK", "MARLOWE_MODEL_TIMEOUT", "MARLOWE_MODEL_VISION", "MARLOWE_PUBLIC_URL",
	"MARLOWE_REDIS_URL", "MARLOWE_REPLICA_ID", "MARLOWE_RETENTION", "MARLOWE_ROUTINE_GRACE",
	"MARLOWE_ROUTINE_MAX_PER_CHANNEL", "MARLOWE_ROUTINE_MAX_PER_OWNER", "MARLOWE_ROUTINE_MIN_INTERVAL",
	"MARLOWE_ROUTINE_TICK", "MARLOWE_SANDBOX", "MARLOWE_SANDBOX_ADDR", "MARLOWE_SANDBOX_HOSTS", "MARLOWE_SANDBOX_STREAM",
	"MARLOWE_SECRETS_KEY", "MARLOWE_SECRETS_KEY_OLD", "MARLOWE_SIGNING_KEY", "MARLOWE_SLACK_API_URL", "MARLOWE_SLACK_MODE", "MARLOWE_TELEGRAM_API_URL",
	"MARLOWE_TELEGRAM_MODE", "MARLOWE_TELEGRAM_PRIVATE_CHATS", "MARLOWE_TELEGRAM_WEBHOOK_URL", "MARLOWE_TRACE_CONTENT", "MARLOWE_TRANSCRIBE_API_KEY", "MARLOWE_TRANSCRIBE_BASE_URL", "MARLOWE_TRANSCRIBE_MODEL", "MARLOWE_VERIFY_KEYS",
}

// unknownVar is a MARLOWE_ name the bot does not read, and the known name
// nearest to it ("" when none is near).
type unknownVar struct{ name, nearest string }

// unknownVars picks the unknown MARLOWE_ names out of names (the test
// suite's own MARLOWE_TEST_… and the like are not settings, and not named).
func unknownVars(names []string) []unknownVar {
	var out []unknownVar
	seen := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, "MARLOWE_") || seen[n] || slices.Contains(knownVars, n) || testOnlyVarName(n) {
			continue
		}
		seen[n] = true
		out = append(out, unknownVar{name: n, nearest: nearestVar(n)})
	}
	slices.SortFunc(out, func(a, b unknownVar) int { return strings.Compare(a.name, b.name) })
	return out
}

func (u unknownVar) String() string {
	if u.nearest == "" {
		return u.name + " is not a Marlowe setting and is ignored"
	}
	return u.name + " is not a Marlowe setting and is ignored: did you mean " + u.nearest + "?"
}

func testOnlyVarName(n string) bool {
	for _, p := range []string{"MARLOWE_TEST_", "MARLOWE_BENCH_", "MARLOWE_MCP_SERVERS_DIR", "MARLOWE_SCRIPT", "MARLOWE_SQLITE_CHILD_", "MARLOWE_REQUIRE_SERVICES", "MARLOWE_CHROMIUM", "MARLOWE_UPDATE_SCREENSHOT"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// nearestVar is the known name closest to n in edits, if it is close
// (at most a third of its length away).
func nearestVar(n string) string {
	best, bestD := "", len(n)/3+1
	for _, k := range knownVars {
		if d := editDistance(n, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// settingNames are the names set for this process: its environment and
// the MARLOWE_CONFIG file.
func settingNames(getenv func(string) string) []string {
	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	if path := getenv("MARLOWE_CONFIG"); path != "" {
		if file, err := readConfigFile(path); err == nil {
			for k := range file {
				names = append(names, k)
			}
		}
	}
	return names
}
