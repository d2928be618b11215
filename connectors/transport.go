package connectors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// baselineEnv is all a stdio server inherits from Marlowe's environment;
// everything else it needs is in its configured env. Never the bot's
// platform tokens, model keys, signing key, database or Redis URLs.
var baselineEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// childEnv is the environment of a stdio server.
func childEnv(s Server, getenv func(string) string) []string {
	var env []string
	for _, k := range baselineEnv {
		if v := getenv(k); v != "" {
			if _, own := s.Env[k]; !own {
				env = append(env, k+"="+v)
			}
		}
	}
	for _, k := range sortedKeys(s.Env) {
		env = append(env, k+"="+s.Env[k])
	}
	return env
}

// dialer builds a server's transports. It is the one place where a
// connection is made, so an HTTP client carrying someone's token can be
// injected here per call site later (Options.HTTPClient).
type dialer struct {
	getenv     func(string) string
	httpClient func(server string) *http.Client
	terminate  time.Duration
	// traced: tools/call requests note their JSON-RPC id on their MCP
	// client span (trace.go); false, nothing is wrapped.
	traced bool
}

// connection is one live session and, for stdio, its process.
type connection struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd
}

func (c *connection) close() {
	if c == nil {
		return
	}
	if c.session != nil {
		_ = c.session.Close()
	}
	killGroup(c.cmd)
}

// dial connects client to server s. stderr receives a stdio server's
// standard error.
func (d dialer) dial(ctx context.Context, newClient func() *mcp.Client, s Server, stderr io.Writer) (*connection, error) {
	client := newClient()
	switch s.Type {
	case Stdio:
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = childEnv(s, d.getenv)
		cmd.Dir = s.Cwd
		cmd.Stderr = stderr
		isolate(cmd)
		var t mcp.Transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: d.terminate}
		if d.traced {
			t = idTransport{t}
		}
		sess, err := client.Connect(ctx, t, nil)
		if err != nil {
			killGroup(cmd)
			if cmd.Process != nil {
				_, _ = cmd.Process.Wait()
			}
			return nil, fmt.Errorf("starting %s: %w", s.Command, err)
		}
		return &connection{session: sess, cmd: cmd}, nil
	case HTTP, SSE:
		hc := d.client(s)
		if s.Type == HTTP {
			sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: 2}, nil)
			if err == nil {
				return &connection{session: sess}, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
			// A server that only has the legacy SSE transport (a fresh
			// client: the failed attempt leaves state in the first).
			sess, sseErr := newClient().Connect(ctx, &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}, nil)
			if sseErr == nil {
				return &connection{session: sess}, nil
			}
			return nil, fmt.Errorf("connecting to %s: streamable HTTP: %w; SSE fallback: %v", s.URL, err, sseErr)
		}
		sess, err := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s (SSE): %w", s.URL, err)
		}
		return &connection{session: sess}, nil
	}
	return nil, errors.New("unknown transport " + s.Type)
}

// client is the HTTP client for a remote server: the injected one (or
// http.DefaultClient's transport) with the configured headers added.
func (d dialer) client(s Server) *http.Client {
	var base *http.Client
	if d.httpClient != nil {
		base = d.httpClient(s.Name)
	}
	if base == nil {
		base = &http.Client{}
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if len(s.Headers) > 0 {
		rt = headerTransport{base: rt, headers: s.Headers}
		c.Transport = rt
	}
	if d.traced {
		c.Transport = idRoundTripper{base: rt}
	}
	return &c
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}
