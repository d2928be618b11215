package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Server is a redis-server of the test's own, on a free port, keeping
// nothing on disk: fault tests stop and restart it (it comes back empty, as
// a production Redis without persistence does) without touching the
// machine's shared Redis.
type Server struct {
	tb   testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// StartServer starts a private redis-server, stopped when tb ends. It skips
// (or fails under MARLOWE_REQUIRE_SERVICES=1) when redis-server is missing.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
			tb.Fatalf("testredis: redis-server not found: %v", err)
		}
		tb.Skipf("testredis: redis-server not found (%v); install Debian's redis-server", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{tb: tb, port: port, dir: tb.TempDir()}
	s.Start()
	tb.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Start starts the server (again) and waits until it answers.
func (s *Server) Start() {
	s.tb.Helper()
	s.cmd = exec.Command("redis-server", "--port", fmt.Sprint(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("testredis: start redis-server: %v", err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.tb.Fatalf("testredis: redis-server on port %d did not answer", s.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server; its data is gone.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
