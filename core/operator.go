package core

import (
	"fmt"
	"strings"
)

// Operator is one configured administrator: a user on one platform
// (MARLOWE_ADMINS=slack:U012ABC,sandbox:alice). Operators administer every
// channel of their platform.
type Operator struct {
	Platform string
	UserID   string
}

// ParseOperators reads a comma-separated list of platform:userID.
func ParseOperators(s string) ([]Operator, error) {
	var out []Operator
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		platform, id, ok := strings.Cut(part, ":")
		platform, id = strings.ToLower(strings.TrimSpace(platform)), strings.TrimSpace(id)
		if !ok || platform == "" || id == "" || strings.ContainsAny(id, " :") {
			return nil, fmt.Errorf("admin %q: want platform:userID, e.g. slack:U012ABC or sandbox:alice", part)
		}
		out = append(out, Operator{Platform: platform, UserID: id})
	}
	return out, nil
}
