package sandbox

import (
	"context"
	"errors"
	"net/url"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Permalinker = (*Sandbox)(nil)

// Permalink implements core.Permalinker: a link to the workspace page that
// opens the message's channel and its thread (`#c=<channel>&t=<message>`),
// what `status` and `approvals` show for each thread.
func (s *Sandbox) Permalink(_ context.Context, ref core.MessageRef) (string, error) {
	s.lnMu.Lock()
	base := s.url
	s.lnMu.Unlock()
	if base == "" {
		return "", errors.New("sandbox: permalink: the workspace is not listening yet")
	}
	if ref.Scope.Channel == "" || ref.ID == "" {
		return "", errors.New("sandbox: permalink: no channel or message")
	}
	return base + "#" + url.Values{"c": {ref.Scope.Channel}, "t": {ref.ID}}.Encode(), nil
}
