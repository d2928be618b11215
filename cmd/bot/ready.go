package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// readyCheck is one dependency /readyz asks: a cheap call that fails when
// the bot could not do its work.
type readyCheck struct {
	name  string
	check func(context.Context) error
	// status, when set, is asked instead of check: what it says goes on
	// the ok line.
	status func(context.Context) (string, error)
}

// run asks the check: what to add to its ok line, or why it failed.
func (c readyCheck) run(ctx context.Context) (string, error) {
	if c.status != nil {
		return c.status(ctx)
	}
	return "", c.check(ctx)
}

// readyChecks are serve's: the journal answers a query, Redis (when
// configured) answers PING, and every surface that can tell says it is
// ready (Slack: not after tokens_revoked or app_uninstalled).
func readyChecks(j core.Journal, rdb *goredis.Client, surfaces map[string]core.Surface) []readyCheck {
	checks := []readyCheck{{name: "journal", check: func(ctx context.Context) error {
		// A channel that cannot exist: one indexed lookup, no rows.
		_, _, err := j.Head(ctx, "readyz/probe/none")
		return err
	}}}
	if rdb != nil {
		checks = append(checks, readyCheck{name: "redis", check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
	}
	for _, n := range slices.Sorted(maps.Keys(surfaces)) {
		if r, ok := surfaces[n].(readier); ok {
			checks = append(checks, readyCheck{name: n, check: func(context.Context) error { return r.Ready() }})
		}
		if q, ok := surfaces[n].(deliveryQueuer); ok {
			// What waits for a retry is shown, not a reason to stop
			// serving: the replica is what retries it.
			checks = append(checks, readyCheck{name: n + " delivery queue", status: func(ctx context.Context) (string, error) {
				b, err := q.DeliveryBacklog(ctx)
				switch {
				case err != nil:
					return "", err
				case b.Queued == 0:
					return "empty", nil
				}
				return fmt.Sprintf("%d waiting for a retry, oldest queued %s ago", b.Queued, time.Since(b.Oldest).Round(time.Second)), nil
			}})
		}
	}
	return checks
}

// readyHandler answers /readyz: 200 when every check passes, else 503;
// the plain-text body has one line per check either way, so the failing
// one is named.
func readyHandler(checks []readyCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		var b strings.Builder
		ready := true
		for _, c := range checks {
			if note, err := c.run(ctx); err != nil {
				ready = false
				fmt.Fprintf(&b, "%s: %s\n", c.name, redactDSN(oneLine(err.Error())))
			} else if note != "" {
				fmt.Fprintf(&b, "%s: ok (%s)\n", c.name, oneLine(note))
			} else {
				fmt.Fprintf(&b, "%s: ok\n", c.name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "not ready\n"+b.String())
			return
		}
		fmt.Fprint(w, "ready\n"+b.String())
	})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cmdHealthcheck GETs /readyz on MARLOWE_HTTP_ADDR: exit 0 when ready, 1
// otherwise. A wildcard host (":8081", "0.0.0.0:8081") is asked on loopback.
func cmdHealthcheck(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErr("healthcheck takes no arguments (it reads MARLOWE_HTTP_ADDR)")
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	target, err := readyURL(cfg.HTTPAddr)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return exitError{code: 1, err: err}
	}
	// No proxy: the bot is on this machine.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return exitError{code: 1, err: fmt.Errorf("healthcheck: %s: %w", target, err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprint(stdout, string(body))
	if resp.StatusCode != http.StatusOK {
		return exitError{code: 1, err: fmt.Errorf("healthcheck: %s answered %s", target, resp.Status)}
	}
	return nil
}

// readyURL is the /readyz URL for a listen address.
func readyURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("healthcheck: MARLOWE_HTTP_ADDR=%q: %w", addr, err)
	}
	if port == "" || port == "0" {
		return "", errors.New("healthcheck: MARLOWE_HTTP_ADDR has no fixed port to ask")
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// drainCheck fails once the engine drains for shutdown, first of all
// checks, so a load balancer stops sending work the moment it begins.
func drainCheck(e *engine.Engine, stopping <-chan struct{}) readyCheck {
	return readyCheck{name: "drain", check: func(context.Context) error {
		select {
		case <-stopping: // told to stop: the surfaces deliver what they hold, then the engine drains
			return errors.New("draining for shutdown: new deliveries are refused")
		default:
		}
		if e.Draining() {
			return errors.New("draining for shutdown: new deliveries are refused")
		}
		return nil
	}}
}
