package testredis

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A port taken between finding it free and the server binding it: the
// server exits at once and start says so, instead of pinging a dead port
// for 10 s (a CI run failed that way), so StartServer can try another.
func TestStartOnATakenPortFailsFast(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not found")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Server{tb: t, port: l.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}
	began := time.Now()
	err = s.start()
	if err == nil {
		s.Stop()
		t.Fatal("redis-server started on a taken port")
	}
	if !strings.Contains(err.Error(), "exited") || time.Since(began) > 8*time.Second {
		t.Fatalf("after %v: %v", time.Since(began), err)
	}
	// And a free port works, restarts included.
	s2 := StartServer(t)
	s2.Stop()
	s2.Start()
}
