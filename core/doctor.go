package core

import "context"

// CheckStatus is the outcome of one doctor check.
type CheckStatus string

const (
	CheckOK   CheckStatus = "ok"
	CheckWarn CheckStatus = "warn" // works, but someone should look (a look-alike account)
	CheckFail CheckStatus = "fail" // will not work until fixed
)

// Check is one line of `bot doctor`: what was checked, what came back and,
// when it is not OK, what to do about it.
type Check struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	Detail string      `json:"detail,omitempty"`
	Fix    string      `json:"fix,omitempty"`
}

// Doctor is an optional Surface capability: the surface checks its own
// configuration against the live platform (tokens, scopes, intents, privacy
// mode) and says how to fix what is wrong. `bot doctor` calls it for every
// configured surface that has it.
type Doctor interface {
	Doctor(ctx context.Context) []Check
}
