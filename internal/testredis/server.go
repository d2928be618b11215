package testredis

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/internal/testport"
)

// Server is a redis-server of the test's own, on a free port, keeping
// nothing on disk: fault tests stop and restart it (it comes back empty, as
// a production Redis without persistence does) without touching the
// machine's shared Redis.
type Server struct {
	tb     testing.TB
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan error // the running server's exit, once
}

// StartServer starts a private redis-server, stopped when tb ends. It skips
// (or fails under MARLOWE_REQUIRE_SERVICES=1) when redis-server is missing.
// A port found free can be taken by another process before the server
// binds it (go test runs packages side by side): the server then exits at
// once, and another port is tried.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
			tb.Fatalf("testredis: redis-server not found: %v", err)
		}
		tb.Skipf("testredis: redis-server not found (%v); install Debian's redis-server", err)
	}
	s := &Server{tb: tb, dir: tb.TempDir()}
	var err error
	for range 5 {
		s.port = testport.Free(tb)
		if err = s.start(); err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("testredis: %v", err)
	return nil
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Start starts the server again, on its port, and waits until it answers.
func (s *Server) Start() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatalf("testredis: %v", err)
	}
}

func (s *Server) start() error {
	var out bytes.Buffer // read only once the process has exited
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.cmd, s.exited = cmd, exited
	// Ping until it answers, watching for its exit meanwhile: on a port
	// someone else holds, a ping may hang on their socket while the
	// server has long given up.
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	answered := make(chan bool, 1)
	go func() {
		for ctx.Err() == nil {
			if rdb.Ping(ctx).Err() == nil {
				answered <- true
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		answered <- false
	}()
	var err error
	pinged := false
	select {
	case ok := <-answered:
		pinged = true
		if !ok {
			err = fmt.Errorf("redis-server on port %d did not answer", s.port)
			_ = cmd.Process.Kill()
			<-exited
			s.cmd, s.exited = nil, nil
		}
	case werr := <-exited:
		s.cmd, s.exited = nil, nil
		err = fmt.Errorf("redis-server on port %d exited (%v): %s", s.port, werr, lastLine(out.String()))
	}
	cancel()
	_ = rdb.Close() // ends a ping stuck on a socket
	if !pinged {
		<-answered // the pinger has returned
	}
	return err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Stop kills the server; its data is gone.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}
