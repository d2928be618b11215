package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// erasureNote is the text erased; erasureToken is its one distinctive word,
// looked for on its own too (a full-text index keeps words, not sentences).
const (
	erasureNote  = "the vault code is zebrafjord 7731"
	erasureToken = "zebrafjord"
)

// TestQADeleteMemoryErasesEverywhere is issue 25's first finding, through
// the real `bot serve` (engine, memory service, store), the fake Slack and
// the fake model, on SQLite and on PostgreSQL with Redis: Alice has the bot
// remember a note (message.received, model.step with the tool's arguments,
// tool.requested, tool.completed, an answer quoting it), Bob gets it
// recalled and quoted, `memories` lists it, and then Alice says
// `delete memory <id>`. Afterwards, checked from outside: no row of any
// table (journal, memory index, embeddings, full-text index) and no Redis
// key or value holds the note or its distinctive word; `bot replay` of the
// channel and `bot replay --run` of every run do not print it; `bot verify`
// passes; the reply counts what was removed per kind; every redaction is a
// signed command.redacted in Alice's name naming its target's kind; and a
// follow-up in Alice's thread after the delete does not record the note
// again as conversation history.
func TestQADeleteMemoryErasesEverywhere(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b := startQA(t, qaOpts{})
		erasureScenario(t, b)
		scanSQLite(t, filepath.Join(b.dir, "marlowe.db"))
		checkReplayAndVerify(t, b, nil)
	})
	t.Run("postgres+redis", func(t *testing.T) {
		t.Parallel()
		dbURL := testpg.New(t)
		rs := testredis.StartServer(t)
		extra := map[string]string{"MARLOWE_DATABASE_URL": dbURL, "MARLOWE_REDIS_URL": rs.URL()}
		b := startQA(t, qaOpts{env: extra})
		erasureScenario(t, b)
		scanRedis(t, rs.URL())
		b.stop()
		scanPostgres(t, dbURL)
		checkReplayAndVerify(t, b, extra)
	})
}

func erasureScenario(t *testing.T, b *qaBot) {
	t.Helper()
	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "remember", `{"text":"`+erasureNote+`"}`)),
		llmtest.Text("Noted: "+erasureNote+"."),
	)
	aliceRoot, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" remember that "+erasureNote)
	b.waitPost("Alice's answer", hasText("Noted: "+erasureNote))
	b.waitIdle()

	b.model.Enqueue(llmtest.Text("Alice said: " + erasureNote))
	b.slack.Say(qaGeneral, "", qaBob, b.mention+" what is the vault code?")
	b.waitPost("Bob's answer", hasText("Alice said: "+erasureNote))
	b.waitIdle()

	memRoot, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" memories")
	list := b.waitPost("the memories list", func(p slackfake.Post) bool {
		return p.ThreadTS == memRoot && strings.Contains(p.Text, erasureNote)
	})
	m := regexp.MustCompile("`(\\w+)` " + regexp.QuoteMeta(erasureNote)).FindStringSubmatch(list.Text)
	if m == nil {
		t.Fatalf("no memory id in %q", list.Text)
	}
	b.waitIdle()

	delRoot, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" delete memory "+m[1])
	reply := b.waitPost("the delete's reply", func(p slackfake.Post) bool {
		return p.ThreadTS == delRoot && strings.Contains(p.Text, "Deleted memory")
	}).Text
	b.waitIdle()
	// Alice's remember (1 message.received); the steps that carried the
	// note (her run's two, Bob's answer, the `memories` listing); the
	// remember call (its result is an id only); Bob's automatic recall
	// result; the two answers and the listing posted; the memory.written.
	for _, want := range []string{
		"1 note", "1 message", "1 tool call", "1 tool result",
		"4 model steps", "3 replies of mine", "redaction marker", "Messages on Slack itself are not changed",
	} {
		if !strings.Contains(reply, want) {
			t.Errorf("the delete's reply lacks %q:\n%s", want, reply)
		}
	}
	if strings.Contains(reply, "Still holding") {
		t.Errorf("the delete's reply says something still holds the text:\n%s", reply)
	}
	if strings.Contains(strings.ToLower(reply), erasureToken) {
		t.Errorf("the delete's reply quotes the note: %s", reply)
	}
	// A follow-up in Alice's thread: its run records the conversation's
	// history, which must not bring the note back.
	b.model.Enqueue(llmtest.Text("You're welcome."))
	b.slack.Say(qaGeneral, aliceRoot, qaAlice, "thanks")
	b.waitPost("the follow-up's answer", hasText("You're welcome."))
	b.waitIdle()
}

// holds reports whether s holds the note, its distinctive word, or their
// hex (PostgreSQL prints bytea as hex).
func holds(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, erasureToken) || strings.Contains(l, hex.EncodeToString([]byte(erasureToken)))
}

func scanSQLite(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if !slices.Contains(tables, "commands") || !slices.Contains(tables, "memory_vectors") || !slices.Contains(tables, "memory_fts_data") {
		t.Fatalf("tables %v: the scan would miss the journal, the embeddings or the full-text index", tables)
	}
	for _, tbl := range tables {
		r, err := db.Query(`SELECT * FROM "` + tbl + `"`)
		if err != nil {
			t.Fatalf("scan %s: %v", tbl, err)
		}
		cols, _ := r.Columns()
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				var s string
				switch x := v.(type) {
				case []byte:
					s = string(x)
				case string:
					s = x
				}
				if holds(s) {
					t.Errorf("table %s column %s still holds the note: %.200q", tbl, cols[i], s)
				}
			}
		}
		r.Close()
	}
}

func scanPostgres(t *testing.T, dbURL string) {
	t.Helper()
	for _, hit := range pgHolding(t, dbURL, holds) {
		t.Errorf("%s still holds the note", hit)
	}
}

// pgHolding lists the rows of every table of the database that match.
func pgHolding(t *testing.T, dbURL string, match func(string) bool) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s, n string
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, pgx.Identifier{s, n}.Sanitize())
	}
	rows.Close()
	if len(tables) < 4 {
		t.Fatalf("only tables %v", tables)
	}
	var hits []string
	for _, tbl := range tables {
		r, err := conn.Query(ctx, `SELECT t::text FROM `+tbl+` t`)
		if err != nil {
			t.Fatalf("scan %s: %v", tbl, err)
		}
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			if match(s) {
				hits = append(hits, fmt.Sprintf("table %s: %.300s", tbl, s))
			}
		}
		r.Close()
	}
	return hits
}

func scanRedis(t *testing.T, url string) { t.Helper(); scanRedisFor(t, url, holds) }

// scanRedisFor fails on any Redis key or value that matches.
func scanRedisFor(t *testing.T, url string, holds func(string) bool) {
	t.Helper()
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("Redis holds no key at all: the scan proves nothing")
	}
	for _, k := range keys {
		var dump string
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			dump = c.Get(ctx, k).Val()
		case "hash":
			dump = fmt.Sprint(c.HGetAll(ctx, k).Val())
		case "zset":
			dump = fmt.Sprint(c.ZRangeWithScores(ctx, k, 0, -1).Val())
		case "set":
			dump = fmt.Sprint(c.SMembers(ctx, k).Val())
		case "list":
			dump = fmt.Sprint(c.LRange(ctx, k, 0, -1).Val())
		default:
			t.Errorf("Redis key %s of type %s is not scanned", k, typ)
		}
		if holds(k) || holds(dump) {
			t.Errorf("Redis key %s holds the note: %.200s", k, dump)
		}
	}
}

// checkReplayAndVerify runs `bot verify`, `bot replay` of the channel and
// `bot replay --run` of each of its runs, on the stopped bot's journal.
func checkReplayAndVerify(t *testing.T, b *qaBot, extra map[string]string) {
	t.Helper()
	b.stop()
	vars := map[string]string{"MARLOWE_DATA_DIR": b.dir}
	for k, v := range extra {
		vars[k] = v
	}
	if out, err := runBot(t, env(vars), "", "verify"); err != nil {
		t.Fatalf("verify after the delete: %v %s", err, out)
	}
	out, err := runBot(t, env(vars), "", "replay", "--channel", "slack/"+b.slack.Config().TeamID+"/"+qaGeneral)
	if err != nil {
		t.Fatalf("replay: %v %s", err, out)
	}
	if holds(out) {
		t.Errorf("bot replay prints the note:\n%s", out)
	}
	var st fold.ChannelState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) < 5 || st.Counts["command.redacted"] < 10 {
		t.Errorf("replay: %d runs, %d command.redacted", len(st.Runs), st.Counts["command.redacted"])
	}
	for id := range st.Runs {
		out, err := runBot(t, env(vars), "", "replay", "--run", id)
		if err != nil {
			t.Fatalf("replay --run %s: %v %s", id, err, out)
		}
		if holds(out) {
			t.Errorf("bot replay --run %s prints the note:\n%s", id, out)
		}
	}
}
