package slackfake

import (
	"encoding/json"
	"net/url"
)

// requestTexts lists every string a Web API request carries, JSON decoded
// where a value (or the body) is JSON, so "\u003c!channel\u003e" in a
// blocks parameter reads as the "<!channel>" Slack would render.
func requestTexts(form url.Values, body []byte) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
			var inner any
			if json.Unmarshal([]byte(v), &inner) == nil {
				if _, isString := inner.(string); !isString {
					walk(inner)
				}
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				out = append(out, k)
				walk(e)
			}
		}
	}
	for k, vs := range form {
		if k == "token" {
			continue
		}
		for _, v := range vs {
			walk(v)
		}
	}
	if len(body) > 0 {
		var v any
		if json.Unmarshal(body, &v) == nil {
			walk(v)
		}
	}
	return out
}
