package journaltest

import (
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The tail reads of core.Journal, written as plain filters over a whole
// journal: the reference the stores' SQL is tested against, and what the
// in-memory journal (coretest.MemJournal) serves them with. all is every
// command of the journal in (channel, seq) order; so is what they return.

// runKey names a run within its channel: the stores join on both.
type runKey struct {
	ch  core.ChannelKey
	run string
}

func rk(c core.Command) runKey { return runKey{c.Channel(), c.Run()} }

// Unfinished is the reference for core.Journal.Unfinished, in its widest
// form: every failed run with the posts that follow it. A store may leave
// out failed runs that owe no notice, with their posts.
func Unfinished(all []core.Command) []core.Command {
	ended := map[runKey]bool{}
	balance := map[runKey]int{} // approval.requested minus approval.resolved
	failedAt := map[runKey][]uint64{}
	for _, c := range all {
		if c.Redacted() || c.Run() == "" {
			continue
		}
		switch c.Kind() {
		case core.KindRunCompleted, core.KindRunFailed:
			ended[rk(c)] = true
			if c.Kind() == core.KindRunFailed {
				failedAt[rk(c)] = append(failedAt[rk(c)], c.Seq())
			}
		case core.KindApprovalRequested:
			balance[rk(c)]++
		case core.KindApprovalResolved:
			balance[rk(c)]--
		default:
		}
	}
	var out []core.Command
	for _, c := range all {
		if c.Redacted() || c.Run() == "" {
			continue
		}
		k := rk(c)
		switch c.Kind() {
		case core.KindRunStarted:
			if !ended[k] {
				out = append(out, c)
			}
		case core.KindRunFailed:
			out = append(out, c)
		case core.KindMessagePosted:
			if fs := failedAt[k]; len(fs) > 0 && c.Seq() > fs[0] {
				out = append(out, c)
			}
		case core.KindApprovalRequested:
			if balance[k] > 0 {
				out = append(out, c)
			}
		default:
		}
	}
	return out
}

// Policies is the reference for core.Journal.Policies.
func Policies(all []core.Command) []core.Command {
	var out []core.Command
	for _, c := range all {
		if !c.Redacted() && c.Kind() == core.KindPolicyChanged {
			out = append(out, c)
		}
	}
	return out
}

// PostsSince is the reference for core.Journal.PostsSince.
func PostsSince(all []core.Command, since time.Time) []core.Command {
	chans := map[core.ChannelKey]bool{}
	runs := map[runKey]bool{}
	for _, c := range all {
		if !c.Redacted() && c.Kind() == core.KindMessagePosted && !c.At().Before(since) {
			chans[c.Channel()] = true
			if c.Run() != "" {
				runs[rk(c)] = true
			}
		}
	}
	var out []core.Command
	for _, c := range all {
		if c.Redacted() {
			continue
		}
		switch c.Kind() {
		case core.KindMessagePosted:
			if !c.At().Before(since) {
				out = append(out, c)
			}
		case core.KindPolicyChanged:
			if chans[c.Channel()] {
				out = append(out, c)
			}
		case core.KindMessageReceived:
			if c.Run() != "" && runs[rk(c)] {
				out = append(out, c)
			}
		default:
		}
	}
	return out
}

// ItemChannels is the reference for core.Journal.ItemChannels.
func ItemChannels(all []core.Command, platform string) []core.ChannelKey {
	var out []core.ChannelKey
	for _, c := range all {
		switch c.Kind() {
		case core.KindApprovalRequested, core.KindConsentGranted, core.KindReportFiled:
		default:
			continue
		}
		if c.Redacted() || c.Scope().Platform != platform {
			continue
		}
		if n := len(out); n == 0 || out[n-1] != c.Channel() {
			out = append(out, c.Channel())
		}
	}
	return out
}
