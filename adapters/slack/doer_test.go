package slack

import "net/http"

type (
	httpReq  = http.Request
	httpResp = http.Response
)

// doerFunc is an http client stand-in for slack.OptionHTTPClient.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func defaultDo(r *http.Request) (*http.Response, error) { return http.DefaultClient.Do(r) }
