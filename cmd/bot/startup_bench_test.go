package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// BenchmarkStartupLarge measures start-up to ready (Engine.Start and the
// intent-window rebuild, what serve does before it answers) over a
// PostgreSQL journal of 200k and 1M commands in 800 channels (100 of them, MARLOWE_BENCH_UNFINISHED, ending with unfinished work), and the heap
// the engine holds once ready. Opt-in (it seeds for minutes):
//
//	MARLOWE_BENCH_LARGE=1 go test -run '^$' -bench StartupLarge -benchtime 3x ./cmd/bot/
//
// Metrics: ready-ms (ns/op in ms; start-ms and windows-ms its two parts), heap-MB (heap in use after GC with the
// engine up), start-heap-MB (what start-up added to the heap), and
// resumed-channels (channels folded at start: the ones with unfinished work),
// and, timed apart, unfinished-query-ms (the tail query) and read-resumed-ms
// (reading those channels' resumed-rows commands, which the fold needs).
func BenchmarkStartupLarge(b *testing.B) {
	if os.Getenv("MARLOWE_BENCH_LARGE") != "1" {
		b.Skip("set MARLOWE_BENCH_LARGE=1 to seed large journals and measure start-up")
	}
	for _, n := range []int{200_000, 1_000_000} {
		// Seeded here, once: the testing package calls a sub-benchmark's
		// function more than once (b.N = 1 first).
		url := testpg.New(b)
		signer := coretest.NewSigner(b)
		st, err := postgres.Open(b.Context(), url, signer)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		rows := seedLarge(b, url, signer, n, 800)
		b.Logf("seeded %d commands in %s", rows, time.Since(start).Round(time.Millisecond))
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) { benchStartup(b, st) })
		st.Close()
	}
}

// blockModel never answers: resumed runs stay unfinished, so every
// iteration starts from the same journal.
type blockModel struct{}

func (blockModel) Step(ctx context.Context, _ core.View) (core.Reply, error) {
	<-ctx.Done()
	return core.Reply{}, ctx.Err()
}

func benchStartup(b *testing.B, j core.Journal) {
	ctx := b.Context()
	log := slog.New(slog.DiscardHandler)
	// As serve runs on Postgres: channels are claimed under leases (each
	// iteration's Close releases them for the next).
	leases, _ := j.(core.Leases)
	newEngine := func() *engine.Engine {
		e, err := engine.New(engine.Config{
			Leases:  leases,
			Journal: j, Boundary: core.NewBoundary(nil), Model: blockModel{},
			Surfaces: map[string]core.Surface{"slack": coretest.NewFakeSurface("slack", "UBOT")},
			Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
			CardKey:  []byte("bench-card-key-0123456789abcdef"),
			Logger:   log,
		})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	heap := func() uint64 {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	var before, after uint64
	var resumed int
	var startDur, windowsDur time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		before = heap()
		e := newEngine()
		store := intent.NewMemoryStore(nil)
		b.StartTimer()
		t0 := time.Now()
		if err := e.Start(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := rebuildWindows(ctx, j, store, log); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		startDur += t1.Sub(t0)
		windowsDur += time.Since(t1)
		after = heap()
		if i == b.N-1 {
			resumed = countLoaded(b, j)
		}
		runtime.KeepAlive(store)
		_ = e.Close()
		b.StartTimer()
	}
	b.StopTimer()
	// The two parts of start-up, timed once more on their own: the tail
	// query, and reading the journals of the channels it names (the fold).
	t0 := time.Now()
	tail, err := j.Unfinished(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "unfinished-query-ms")
	t0 = time.Now()
	rows, seen := 0, map[core.ChannelKey]bool{}
	for _, c := range tail {
		if !seen[c.Channel()] {
			seen[c.Channel()] = true
			cmds, err := j.Read(ctx, c.Channel(), 1, 0)
			if err != nil {
				b.Fatal(err)
			}
			rows += len(cmds)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "read-resumed-ms")
	b.ReportMetric(float64(rows), "resumed-rows")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ready-ms")
	b.ReportMetric(float64(after)/(1<<20), "heap-MB")
	b.ReportMetric((float64(after)-float64(before))/(1<<20), "start-heap-MB")
	b.ReportMetric(float64(resumed), "resumed-channels")
	b.ReportMetric(float64(startDur.Milliseconds())/float64(b.N), "start-ms")
	b.ReportMetric(float64(windowsDur.Milliseconds())/float64(b.N), "windows-ms")
}

// countLoaded counts the channels Start folds: those the tail shows
// unfinished work in.
func countLoaded(b *testing.B, j core.Journal) int {
	tail, err := j.Unfinished(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	chs := map[core.ChannelKey]bool{}
	for _, c := range tail {
		if c.Kind() == core.KindRunStarted || c.Kind() == core.KindApprovalRequested {
			chs[c.Channel()] = true
		}
	}
	return len(chs)
}

// seedLarge writes about n sealed commands over channels channels straight
// into the commands table (COPY), as a month of traffic: runs of six
// commands (message, run.started, two model steps, the answer, run.completed),
// one in fifty failing with its notice posted; MARLOWE_BENCH_UNFINISHED
// channels (default 100) end with unfinished work, two in three with a run
// still working and the rest with one waiting for approval; ten set a
// policy. It returns the number of commands written.
func seedLarge(b *testing.B, url string, signer *core.Signer, n, channels int) int {
	unfinished := min(channels, benchEnvInt("MARLOWE_BENCH_UNFINISHED", 100))
	end := time.Now().Add(-time.Minute)
	span := 30 * 24 * time.Hour
	perChannel := n / channels
	text := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 3)
	return copyChannels(b, url, channels, func(ci int) (seededHead, []core.Record, error) {
		return seedChannel(signer, ci, unfinished, perChannel, end.Add(-span), span, text)
	})
}

// seededHead is a seeded channel's head.
type seededHead = struct {
	ch   core.ChannelKey
	seq  uint64
	hash core.Hash
}

// copyChannels writes the sealed commands build returns for channels
// 0..channels-1 straight into the commands table (COPY), on every core,
// then their heads, and returns the number of commands written.
func copyChannels(b *testing.B, url string, channels int, build func(ci int) (seededHead, []core.Record, error)) int {
	ctx := b.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	cols := []string{"channel", "seq", "id", "kind", "v", "actor_type", "actor_id", "actor_platform",
		"platform", "workspace", "channel_id", "thread", "run", "cause", "at", "payload", "redacted",
		"payload_hash", "prev", "key_id", "sig"}
	var (
		mu    sync.Mutex
		heads []seededHead
		total int
		errs  []error
	)
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch [][]any
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				_, err := pool.CopyFrom(ctx, pgx.Identifier{"commands"}, cols, pgx.CopyFromRows(batch))
				batch = batch[:0]
				return err
			}
			for ci := range work {
				h, rows, err := build(ci)
				if err == nil {
					for _, r := range rows {
						batch = append(batch, []any{string(h.ch), int64(r.Seq), r.ID, r.Kind, r.V, string(r.Actor.Type), r.Actor.ID,
							r.Actor.Platform, r.Scope.Platform, r.Scope.Workspace, r.Scope.Channel, r.Scope.Thread, r.Run, r.Cause,
							r.At.UTC(), r.Payload, false, r.PayloadHash, r.Prev, r.Key, r.Sig})
					}
					if len(batch) >= 20_000 {
						err = flush()
					}
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					heads = append(heads, h)
					total += len(rows)
				}
				mu.Unlock()
			}
			if err := flush(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	for ci := range channels {
		work <- ci
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatal(errs[0])
	}
	hb := &pgx.Batch{}
	for _, h := range heads {
		hb.Queue(`INSERT INTO channel_heads (channel, seq, hash) VALUES ($1, $2, $3)`, string(h.ch), int64(h.seq), h.hash[:])
	}
	if err := pool.SendBatch(ctx, hb).Close(); err != nil {
		b.Fatal(err)
	}
	// What autovacuum does on a live database: statistics and the
	// visibility map the planner relies on.
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE commands`); err != nil {
		b.Fatal(err)
	}
	return total
}

// seedChannel builds one channel's sealed commands.
func seedChannel(signer *core.Signer, ci, unfinished, rows int, from time.Time, span time.Duration, text string) (seededHead, []core.Record, error) {
	var at time.Time
	bd := core.NewBoundary(func() time.Time { return at })
	sc := core.Scope{Platform: "slack", Workspace: "T1", Channel: fmt.Sprintf("C%04d", ci)}
	ann := core.Person{ID: fmt.Sprintf("U%03d", ci%97), Name: "Ann"}
	step := span / time.Duration(rows+1)
	var out []core.Record
	var prev core.Hash
	seq := uint64(0)
	res := seededHead{ch: sc.Key()}
	add := func(d core.Draft, err error) error {
		if err != nil {
			return err
		}
		seq++
		c, err := signer.Seal(d, seq, prev)
		if err != nil {
			return err
		}
		prev = c.Hash()
		out = append(out, c.Record())
		at = at.Add(step)
		return nil
	}
	at = from
	if ci%80 == 0 { // ten channels set a policy
		if err := add(bd.Human(ann, sc, core.Meta{}, &core.PolicyChanged{Policy: core.Policy{ThreadWindowS: 1800}})); err != nil {
			return res, nil, err
		}
	}
	run := 0
	for {
		left := rows - int(seq)
		trailing := ci < unfinished // the first two thirds: a run working at the end; the rest: one waiting for approval
		if left < 6 || trailing && left < 10 {
			break
		}
		run++
		runID := fmt.Sprintf("r%04d-%05d", ci, run)
		msgID := fmt.Sprintf("M%04d-%05d", ci, run)
		thread := sc
		thread.Thread = msgID
		mr, err := bd.Human(ann, sc, core.Meta{Run: runID}, &core.MessageReceived{MessageID: msgID, Author: ann,
			Visibility: core.Public, Text: "<@UBOT> " + text, Reason: "mention"})
		if err := add(mr, err); err != nil {
			return res, nil, err
		}
		if err := add(bd.Agent(runID, thread, core.Meta{Cause: mr.ID()}, &core.RunStarted{Trigger: msgID})); err != nil {
			return res, nil, err
		}
		if err := add(bd.Agent(runID, thread, core.Meta{}, &core.ModelStep{Index: 0, Text: text, Usage: core.Usage{InputTokens: 900, OutputTokens: 80}})); err != nil {
			return res, nil, err
		}
		if run%50 == 0 {
			failSeq := seq + 1
			if err := add(bd.Agent(runID, thread, core.Meta{}, &core.RunFailed{Status: core.RunBroken, Cause: "the model provider is down"})); err != nil {
				return res, nil, err
			}
			if err := add(bd.Agent(runID, thread, core.Meta{}, &core.MessagePosted{EffectID: core.EffectID(sc.Key(), failSeq, 0),
				MessageID: "B" + msgID, Role: core.RoleNotice, Text: "❌ I couldn't finish this: the model provider is down."})); err != nil {
				return res, nil, err
			}
			continue
		}
		if err := add(bd.Agent(runID, thread, core.Meta{}, &core.ModelStep{Index: 1, Text: text, Final: true, Usage: core.Usage{InputTokens: 1000, OutputTokens: 120}})); err != nil {
			return res, nil, err
		}
		if err := add(bd.Agent(runID, thread, core.Meta{}, &core.MessagePosted{EffectID: "fx" + msgID, MessageID: "B" + msgID,
			Answering: msgID, AnsweringUser: ann.ID, AnsweringTop: true, Role: core.RoleAnswer, Text: text})); err != nil {
			return res, nil, err
		}
		if err := add(bd.Agent(runID, thread, core.Meta{}, &core.RunCompleted{})); err != nil {
			return res, nil, err
		}
	}
	if ci < unfinished {
		runID, msgID := fmt.Sprintf("r%04d-open", ci), fmt.Sprintf("M%04d-open", ci)
		thread := sc
		thread.Thread = msgID
		at = time.Now().Add(-30 * time.Second)
		mr, err := bd.Human(ann, sc, core.Meta{Run: runID}, &core.MessageReceived{MessageID: msgID, Author: ann,
			Visibility: core.Public, Text: "<@UBOT> " + text, Reason: "mention"})
		if err := add(mr, err); err != nil {
			return res, nil, err
		}
		if err := add(bd.Agent(runID, thread, core.Meta{Cause: mr.ID()}, &core.RunStarted{Trigger: msgID})); err != nil {
			return res, nil, err
		}
		if ci >= unfinished*2/3 {
			if err := add(bd.Agent(runID, thread, core.Meta{}, &core.ApprovalRequested{ApprovalID: "ap-" + runID, CallID: "c1",
				Tool: "send", Consequence: "write", Summary: "send a message", Requester: ann.ID, ExpiresAt: time.Now().Add(24 * time.Hour)})); err != nil {
				return res, nil, err
			}
		}
	}
	res.seq, res.hash = seq, prev
	return res, out, nil
}
