package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// Listen addresses (MARLOWE_HTTP_ADDR, MARLOWE_SANDBOX_ADDR) as people
// get them wrong: a bare port, a port another process holds. Each error
// names the variable and the fix.

// checkListenAddr reports a value of variable name that is not host:port.
func checkListenAddr(name, v string) error {
	if v == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			return fmt.Errorf("%s=%s: the port %q is not a number from 0 to 65535", name, v, port)
		}
		return nil
	}
	if n, perr := strconv.Atoi(v); perr == nil && n >= 0 && n <= 65535 {
		return fmt.Errorf("%s=%s is a port without a host: set %s=127.0.0.1:%d (this machine only) or %s=:%d (every interface, as in a container)", name, v, name, n, name, n)
	}
	return fmt.Errorf("%s=%s is not host:port (for example 127.0.0.1:8081): %w", name, v, err)
}

// listenError explains a failed listen on addr, configured by variable
// name: a port in use is most likely another Marlowe.
func listenError(name, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s=%s: the port is already in use. Most likely another Marlowe is running (an earlier `bot serve`, or `docker compose up`): stop it, or set %s to a free port. (%w)", name, addr, name, err)
	}
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("%s=%s: not allowed to listen there (ports below 1024 need privileges): set %s to a port above 1024. (%w)", name, addr, name, err)
	}
	return fmt.Errorf("%s=%s: listen: %w", name, addr, err)
}

// browseURL is the http URL a browser on this machine opens for a
// listener bound at addr: a wildcard host ("", 0.0.0.0, [::]) is reached
// as localhost ("http://[::]:8080/" is no address to open).
func browseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
