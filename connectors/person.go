package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/marlowe-bot/marlowe/core"
)

// A server in "person" identity mode has no shared session: nobody's
// credentials but the requester's ever reach it. Until someone has signed
// in it offers one tool, <server>__sign_in; the first person whose sign-in
// works lists its tools with their token (tool definitions do not depend
// on who asks); and every call opens a session carrying the requester's
// own token, closed after the call, so no session is ever shared between
// people. A call by someone not signed in sends nothing and returns
// core.Observation.SignIn: the engine parks the run and asks them.

const signInTool = "sign_in"

// runPerson keeps a person server offered until ctx ends.
func (s *server) runPerson(ctx context.Context) {
	st := s.signIn()
	s.mu.Lock()
	s.tools, s.byName = []core.Tool{st}, map[string]core.Tool{st.Name: st}
	s.status, s.since = "sign-in", time.Now()
	s.mu.Unlock()
	s.once.Do(func() { close(s.settled) })
	s.changed()
	<-ctx.Done()
}

// signIn is the tool that connects the requester's own account.
func (s *server) signIn() core.Tool {
	def := &mcp.Tool{Name: signInTool, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, InputSchema: map[string]any{"type": "object"}}
	name := ToolName(s.cfg.Name, signInTool)
	return core.Tool{
		Name: name,
		Description: fmt.Sprintf("Connect the requester's own %s account, so that %s's tools act as them. "+
			"Use it when %s's other tools are not listed yet.", s.cfg.Name, s.cfg.Name, s.cfg.Name),
		Schema: json.RawMessage(`{"type":"object","properties":{}}`), Consequence: core.Read, ActsAsRequester: true,
		Connector: &core.ToolOrigin{Server: s.cfg.Name, Tool: signInTool, Definition: Definition(def), Idempotent: true},
		Run: func(ctx context.Context, tc core.ToolContext, _ json.RawMessage) (core.Observation, error) {
			tok, obs, err := s.token(ctx, tc)
			if err != nil || obs.SignIn != "" {
				return obs, err
			}
			conn, err := s.dialAs(ctx, tok)
			if err != nil {
				if unauthorized(err) {
					return core.Observation{SignIn: s.cfg.Name}, nil
				}
				return core.Observation{}, err
			}
			defer conn.close()
			if err := s.list(ctx, conn.session); err != nil {
				return core.Observation{}, err
			}
			s.mu.Lock()
			st := s.signIn()
			s.tools = append([]core.Tool{st}, s.tools...)
			s.byName[st.Name] = st
			names := make([]string, 0, len(s.tools)-1)
			for _, t := range s.tools[1:] {
				names = append(names, t.Name)
			}
			s.status, s.since = "ready", time.Now()
			s.mu.Unlock()
			s.changed()
			return core.Observation{Text: fmt.Sprintf("%s is connected as the requester. Its tools: %s", s.cfg.Name, strings.Join(names, ", "))}, nil
		},
	}
}

// token is the requester's token for this server, or the observation that
// asks them to sign in.
func (s *server) token(ctx context.Context, tc core.ToolContext) (string, core.Observation, error) {
	if s.m.opts.Tokens == nil {
		return "", core.Observation{}, fmt.Errorf("%s acts as each person, but sign-in is not configured here (MARLOWE_SECRETS_KEY)", s.cfg.Name)
	}
	if tc.Actor.ID == "" {
		return "", core.Observation{}, fmt.Errorf("%s acts as each person, and this call has no person", s.cfg.Name)
	}
	tok, err := s.m.opts.Tokens(ctx, tc.Scope.Platform, tc.Actor.ID, s.cfg.Name)
	if errors.Is(err, core.ErrNotSignedIn) {
		return "", core.Observation{SignIn: s.cfg.Name}, nil
	}
	if err != nil {
		return "", core.Observation{}, fmt.Errorf("%s: the requester's sign-in: %w", s.cfg.Name, err)
	}
	return tok, core.Observation{}, nil
}

// dialAs opens a session carrying tok (and the configured headers).
func (s *server) dialAs(ctx context.Context, tok string) (*connection, error) {
	cfg := s.cfg
	cfg.Headers = maps.Clone(cfg.Headers)
	if cfg.Headers == nil {
		cfg.Headers = map[string]string{}
	}
	cfg.Headers["Authorization"] = "Bearer " + tok
	newClient := func() *mcp.Client {
		return mcp.NewClient(&mcp.Implementation{Name: "marlowe", Version: "1"}, &mcp.ClientOptions{
			Logger: s.m.log.With("server", s.cfg.Name), Capabilities: &mcp.ClientCapabilities{},
			ProgressNotificationHandler: s.progress.handle,
		})
	}
	cctx, cancel := context.WithTimeout(ctx, max(s.cfg.Timeout, 30*time.Second))
	defer cancel()
	conn, err := s.m.dial.dial(cctx, newClient, cfg, s.stderr)
	if err != nil {
		// The error names the URL and the status, never the header.
		return nil, fmt.Errorf("connecting to %s as the requester: %w", s.cfg.Name, err)
	}
	return conn, nil
}

// callAs sends one tools/call as the requester.
func (s *server) callAs(ctx context.Context, tc core.ToolContext, name, remote string, args json.RawMessage) (core.Observation, error) {
	start := time.Now()
	outcome := "ok"
	defer func() { s.observed(ctx, remote, start, outcome, "") }()
	tok, obs, err := s.token(ctx, tc)
	if err != nil || obs.SignIn != "" {
		outcome = "sign-in"
		return obs, err
	}
	conn, err := s.dialAs(ctx, tok)
	if err != nil && unauthorized(err) && s.m.opts.Rejected != nil {
		// Refused before anything was called: the grant is refreshed (or
		// dropped), and a fresh token gets one more try.
		if rerr := s.m.opts.Rejected(ctx, tc.Scope.Platform, tc.Actor.ID, s.cfg.Name, tok); rerr != nil && !errors.Is(rerr, core.ErrNotSignedIn) {
			s.m.log.WarnContext(ctx, "connector: reporting a refused token failed", "server", s.cfg.Name, "err", rerr)
		}
		next, obs, terr := s.token(ctx, tc)
		if terr != nil || obs.SignIn != "" {
			outcome = "sign-in"
			return obs, terr
		}
		if next != tok {
			conn, err = s.dialAs(ctx, next)
		}
	}
	if err != nil {
		if unauthorized(err) {
			outcome = "sign-in" // refused at the server: nothing was called
			return core.Observation{SignIn: s.cfg.Name}, nil
		}
		outcome = "down"
		return core.Observation{}, err
	}
	defer conn.close()
	return s.callOn(ctx, conn, name, remote, args, tc.Progress, &outcome)
}

// unauthorized reports whether a connection was refused for its token.
func unauthorized(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "401") || strings.Contains(strings.ToLower(msg), "unauthorized")
}
