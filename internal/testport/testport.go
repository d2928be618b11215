// Package testport picks loopback ports for servers a test starts in
// another process (a bot binary, redis-server, node), which must be told
// a port before they bind it.
//
// A port found free by listening on :0 comes from the kernel's ephemeral
// range, the same range every outgoing connection's local port comes
// from: with go test running packages side by side, hundreds of
// connections to Postgres and Redis can take it before the child binds
// it, and the child fails with "address in use". Free picks below that
// range instead, where only listeners that asked for a port live.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// low and high bound the ports Free picks from: above the registered
// services a test machine runs (Postgres, Redis), below the ephemeral
// range (Linux's default starts at 32768; it is read when available).
const low, high = 20000, 32768

// Free returns a loopback TCP port that nothing listens on now, outside
// the ephemeral range.
func Free(tb testing.TB) int {
	tb.Helper()
	top := high
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > low+1000 {
				top = min(top, n)
			}
		}
	}
	for range 100 {
		port := low + rand.IntN(top-low)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return port
	}
	tb.Fatal("testport: no free port found")
	return 0
}

// FreeString is Free as a string, for addresses and flags.
func FreeString(tb testing.TB) string {
	tb.Helper()
	return strconv.Itoa(Free(tb))
}
