package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The gateway is driven here rather than by discordgo's Session.Open, which
// (at the pinned master commit, and at v0.29.0) holds the session lock
// while it reads the answer to RESUME, so an INVALID_SESSION or RECONNECT
// arriving there deadlocks it; writes its resume state without a lock from
// the reading goroutine; and runs a reconnect loop that cannot be stopped.
// This loop is small, owns its state on one goroutine and ends with ctx.

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

// gatewayVersion is the gateway API version asked for in the URL.
const gatewayVersion = "10"

type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  int64           `json:"s"`
	T  string          `json:"t"`
}

// session is the resumable state; it lives on the gateway goroutine only.
type session struct {
	id        string
	resumeURL string
	seq       int64
}

func (s *session) resumable() bool { return s.id != "" && s.resumeURL != "" }

// errFatal marks a gateway close Discord says not to retry (bad token,
// disallowed intents, ...).
type errFatal struct {
	code int
	text string
}

func (e *errFatal) Error() string {
	switch e.code {
	case 4004:
		return "discord gateway: authentication failed (4004): check DISCORD_BOT_TOKEN"
	case 4014:
		return "discord gateway: disallowed intents (4014): enable the Message Content intent on the application's Bot page"
	case 4013:
		return "discord gateway: invalid intents (4013)"
	}
	return fmt.Sprintf("discord gateway: closed with %d %s", e.code, e.text)
}

// errInvalidSession is op 9; resumable says whether RESUME may be tried.
type errInvalidSession struct{ resumable bool }

func (e *errInvalidSession) Error() string {
	return fmt.Sprintf("discord gateway: invalid session (resumable=%v)", e.resumable)
}

var errReconnect = errors.New("discord gateway: reconnect requested (op 7)")
var errZombie = errors.New("discord gateway: no heartbeat ack; reconnecting")

// closeEndsSession reports whether err is a close code after which the
// session cannot be resumed: 4007 (invalid seq) and 4009 (session timed
// out) ask for a new session.
func closeEndsSession(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce) && (ce.Code == 4007 || ce.Code == 4009)
}

func fatalClose(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case 4004, 4010, 4011, 4012, 4013, 4014:
			return &errFatal{code: ce.Code, text: ce.Text}
		}
	}
	return nil
}

// gateway connects to url and keeps a session until ctx ends. The first
// connection's failure, and any fatal close, is returned.
func (a *Adapter) gateway(ctx context.Context, gatewayURL string) error {
	var sess session
	backoff := 250 * time.Millisecond
	connected := false
	for ctx.Err() == nil {
		target := gatewayURL
		resume := sess.resumable()
		if resume {
			target = sess.resumeURL
		}
		ok, err := a.connect(ctx, target, &sess, resume)
		if ctx.Err() != nil {
			return nil
		}
		if ok {
			connected, backoff = true, 250*time.Millisecond
		}
		if f := fatalClose(err); f != nil {
			return f
		}
		if closeEndsSession(err) {
			a.log.Info("discord: session closed for good; identifying again", "err", err)
			sess = session{}
			if ok {
				continue
			}
			// Closed before the session was established: not in a tight
			// loop, the backoff below applies.
		}
		var inv *errInvalidSession
		switch {
		case errors.As(err, &inv):
			if !inv.resumable {
				sess = session{}
				a.log.Info("discord: session not resumable; identifying again")
				if sleep(ctx, a.reidentify()) != nil {
					return nil
				}
			}
			continue
		case errors.Is(err, errReconnect), errors.Is(err, errZombie):
			a.log.Info("discord: reconnecting", "reason", err, "resume", sess.resumable())
			continue
		}
		if !connected {
			return fmt.Errorf("discord: connect to the gateway: %w", err)
		}
		if resume && !ok {
			// A resume URL that cannot be reached is given up after a few
			// tries in favour of a fresh IDENTIFY at the gateway URL.
			if backoff >= 4*time.Second {
				sess = session{}
			}
		}
		a.log.Warn("discord: gateway connection lost; reconnecting", "err", err, "in", backoff)
		if sleep(ctx, backoff) != nil {
			return nil
		}
		backoff = min(backoff*2, 30*time.Second)
	}
	return nil
}

// gatewayConn is one socket; writes are serialised.
type gatewayConn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

func (c *gatewayConn) send(op int, d any) error {
	b, err := json.Marshal(map[string]any{"op": op, "d": d})
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// connect runs one socket: HELLO, IDENTIFY or RESUME, then heartbeats and
// dispatches until it ends. ok says whether the session was established
// (READY or RESUMED, or a replayed dispatch) on it.
func (a *Adapter) connect(ctx context.Context, target string, sess *session, resume bool) (ok bool, err error) {
	u, err := url.Parse(target)
	if err != nil {
		return false, fmt.Errorf("gateway url %q: %w", target, err)
	}
	q := u.Query()
	q.Set("v", gatewayVersion)
	q.Set("encoding", "json")
	u.RawQuery = q.Encode()
	ws, _, err := a.dialer.DialContext(ctx, u.String(), nil)
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", u.Host, err)
	}
	c := &gatewayConn{ws: ws}
	done := make(chan struct{})
	var hb sync.WaitGroup
	defer func() {
		close(done)
		code := websocket.CloseNormalClosure
		if ctx.Err() == nil {
			code = 4000 // not 1000/1001: those end the session, which we resume
		}
		c.wmu.Lock()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
		c.wmu.Unlock()
		_ = ws.Close()
		hb.Wait()
	}()
	// ctx ends the read below by closing the socket.
	stopWatch := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stopWatch()

	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	var hello frame
	if err := ws.ReadJSON(&hello); err != nil {
		return false, fmt.Errorf("read HELLO: %w", err)
	}
	var h struct {
		Interval int64 `json:"heartbeat_interval"`
	}
	if hello.Op != opHello || json.Unmarshal(hello.D, &h) != nil || h.Interval <= 0 {
		return false, fmt.Errorf("expected HELLO, got op %d", hello.Op)
	}
	interval := time.Duration(h.Interval) * time.Millisecond

	if resume {
		err = c.send(opResume, map[string]any{"token": "Bot " + a.cfg.BotToken, "session_id": sess.id, "seq": sess.seq})
	} else {
		err = c.send(opIdentify, map[string]any{
			"token":   "Bot " + a.cfg.BotToken,
			"intents": int(Intents),
			"properties": map[string]string{
				"os": runtime.GOOS, "browser": "marlowe", "device": "marlowe",
			},
		})
	}
	if err != nil {
		return false, fmt.Errorf("send %s: %w", map[bool]string{true: "RESUME", false: "IDENTIFY"}[resume], err)
	}

	var seq atomic.Int64
	seq.Store(sess.seq)
	var acked atomic.Bool
	acked.Store(true)
	zombie := make(chan struct{})
	hb.Go(func() {
		// The first beat comes after interval × jitter, as Discord asks.
		t := time.NewTimer(time.Duration(rand.Float64() * float64(interval)))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if !acked.Swap(false) {
				close(zombie)
				_ = ws.Close()
				return
			}
			if err := c.send(opHeartbeat, seq.Load()); err != nil {
				return
			}
			t.Reset(interval)
		}
	})

	for {
		_ = ws.SetReadDeadline(time.Now().Add(interval + 30*time.Second))
		var f frame
		_, b, err := ws.ReadMessage()
		if err != nil {
			select {
			case <-zombie:
				return ok, errZombie
			default:
			}
			return ok, err
		}
		if err := json.Unmarshal(b, &f); err != nil {
			a.log.Warn("discord: malformed gateway frame dropped", "err", err)
			continue
		}
		switch f.Op {
		case opDispatch:
			if f.S > 0 {
				sess.seq = f.S
				seq.Store(f.S)
			}
			ok = true
			switch f.T {
			case "READY":
				var r struct {
					SessionID        string          `json:"session_id"`
					ResumeGatewayURL string          `json:"resume_gateway_url"`
					User             json.RawMessage `json:"user"`
					Guilds           []struct {
						ID string `json:"id"`
					} `json:"guilds"`
				}
				if err := json.Unmarshal(f.D, &r); err != nil {
					return ok, fmt.Errorf("READY: %w", err)
				}
				sess.id, sess.resumeURL = r.SessionID, strings.TrimSpace(r.ResumeGatewayURL)
				if sess.resumeURL == "" {
					// Older gateways (v6, some compatible servers) send no
					// resume_gateway_url: the session resumes where it
					// was made.
					sess.resumeURL = target
				}
				a.readyUser(r.User)
				a.log.Info("discord: session ready", "guilds", len(r.Guilds), "resume_url", sess.resumeURL)
				if a.identified || a.gapSource != nil {
					// A new session replays nothing of the old one's, nor
					// of a previous process's (the journal names those).
					a.holdLive()
					guilds := make([]string, 0, len(r.Guilds))
					for _, g := range r.Guilds {
						guilds = append(guilds, g.ID)
					}
					scan := a.scanGuilds(guilds)
					if !a.background(func(ctx context.Context) { a.fillGaps(ctx, scan) }) {
						a.releaseLive()
					}
				}
				a.identified = true
			case "RESUMED":
				a.log.Info("discord: session resumed", "seq", sess.seq)
				a.background(func(ctx context.Context) {
					ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
					defer cancel()
					if _, err := a.refreshIdentity(ictx); err != nil && ctx.Err() == nil {
						a.log.Warn("discord: identity refresh after resume failed", "err", err)
					}
				})
			default:
				a.dispatch(f.T, f.D)
			}
		case opHeartbeat:
			if err := c.send(opHeartbeat, seq.Load()); err != nil {
				return ok, err
			}
		case opHeartbeatAck:
			acked.Store(true)
		case opReconnect:
			return ok, errReconnect
		case opInvalidSession:
			var resumable bool
			_ = json.Unmarshal(f.D, &resumable)
			return ok, &errInvalidSession{resumable: resumable}
		}
	}
}
