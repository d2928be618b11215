package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
)

// Listen calls fn for every append any process commits (see NotifyChannel),
// until ctx ends, on a connection of its own. Notifications sent while the
// connection was down are lost, so after every (re)connect fn is called once
// with an empty channel: "anything may have changed". Connection failures
// are retried with a capped backoff and reported to onErr (may be nil).
func (s *Store) Listen(ctx context.Context, fn func(ch core.ChannelKey, seq uint64), onErr func(error)) {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			return
		}
		if onErr != nil && err != nil {
			onErr(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, fn func(core.ChannelKey, uint64)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	fn("", 0)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		seqText, ch, ok := strings.Cut(n.Payload, " ")
		if !ok {
			continue
		}
		seq, _ := strconv.ParseUint(seqText, 10, 64)
		fn(core.ChannelKey(ch), seq)
	}
}
