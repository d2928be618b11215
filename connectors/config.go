package connectors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// DefaultTimeout bounds one tool call when a server sets no timeout.
const DefaultTimeout = 60 * time.Second

// DefaultFindToolAfter is how many connector tools a channel is offered
// with their full schemas before find_tool replaces them.
const DefaultFindToolAfter = 20

// Config is a parsed MARLOWE_MCP_CONFIG file.
type Config struct {
	File    string
	Servers []Server // sorted by name; disabled servers included
	// FindToolAfter: past this many connector tools in a channel, the model
	// is offered find_tool instead of every schema.
	FindToolAfter int
	// Warnings are fields the file holds that Marlowe does not know
	// (pasted from another host): doctor shows them, serve logs them.
	Warnings []string
}

// Transport kinds.
const (
	Stdio = "stdio"
	HTTP  = "http" // Streamable HTTP, falling back to SSE
	SSE   = "sse"  // the legacy SSE transport only
)

// Server is one configured MCP server.
type Server struct {
	Name     string
	Type     string // stdio, http or sse
	Disabled bool

	Command string
	Args    []string
	Env     map[string]string // expanded
	Cwd     string

	URL     string
	Headers map[string]string // expanded

	// secrets are the values ${VAR} filled in, masked wherever the
	// server's own output is shown (its stderr in logs, doctor, /readyz).
	secrets []string

	Include []string // tool-name globs; empty = every tool
	Exclude []string
	// Consequences overrides a tool's consequence, by the server's own
	// tool name (globs allowed).
	Consequences map[string]core.Consequence
	// Rooms names, per tool (by the server's own tool name, globs
	// allowed), the argument that picks a room on the bot's own chat
	// platform (a channel id): such a tool posts for the requester, so the
	// reachability rule (core.CheckReach) decides the room before the gate
	// and again when it runs, and the argument is a target (untrusted text
	// may not choose it).
	Rooms   map[string]string
	Timeout time.Duration
	// Channels limits where the server is offered: channel keys
	// (platform/workspace/channel) or bare channel ids; empty = everywhere.
	Channels []string

	// Identity is whose credentials a call carries: IdentityBot (the
	// configured headers, shared) or IdentityPerson (each requester's own
	// OAuth sign-in; docs/connectors.md, "Acting as each person").
	Identity string
	// OAuthClientID and OAuthClientSecret name a client registered with
	// the server's authorization server beforehand ("oauth": {"clientId",
	// "clientSecret"}); empty: dynamic client registration.
	OAuthClientID     string
	OAuthClientSecret string
}

// Identity modes.
const (
	IdentityBot    = "bot"
	IdentityPerson = "person"
)

// ConfigError names the file, server and field a configuration error is in.
type ConfigError struct {
	File, Server, Field string
	Problem             string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Server != "" {
		b.WriteString(": server " + e.Server)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Problem)
	return b.String()
}

type rawFile struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	// Servers is VS Code's name for the same map (.vscode/mcp.json).
	Servers       map[string]json.RawMessage `json:"servers"`
	FindToolAfter *int                       `json:"findToolAfter"`
}

type rawServer struct {
	Type         string            `json:"type"`
	Disabled     bool              `json:"disabled"`
	Command      string            `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	Cwd          string            `json:"cwd"`
	URL          string            `json:"url"`
	Headers      map[string]string `json:"headers"`
	Tools        *rawTools         `json:"tools"`
	Consequences map[string]string `json:"consequences"`
	Rooms        map[string]string `json:"rooms"`
	Timeout      json.RawMessage   `json:"timeout"`
	Channels     []string          `json:"channels"`
	Identity     string            `json:"identity"`
	OAuth        *struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	} `json:"oauth"`
}

type rawTools struct {
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
}

var (
	knownTop    = []string{"mcpServers", "servers", "findToolAfter"}
	knownServer = []string{"type", "disabled", "command", "args", "env", "cwd", "url", "headers", "tools", "consequences", "rooms", "timeout", "channels", "identity", "oauth"}
	knownTools  = []string{"include", "exclude"}
	serverName  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
)

// LoadFile reads and parses the file at path, filling ${VAR} from getenv.
func LoadFile(file string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &ConfigError{File: file, Problem: "cannot read: " + err.Error()}
	}
	return Parse(file, data, getenv)
}

// Parse parses a configuration in the mcpServers shape. Unknown fields are
// warnings, never errors: configurations pasted from other hosts carry
// fields of theirs. Every error names the file, the server and the field.
func Parse(file string, data []byte, getenv func(string) string) (*Config, error) {
	var raw rawFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, &ConfigError{File: file, Problem: "not valid JSON: " + jsonProblem(data, err)}
	}
	switch {
	case raw.MCPServers != nil && raw.Servers != nil:
		return nil, &ConfigError{File: file, Field: "servers", Problem: `both "mcpServers" and "servers" are set: keep one (they are the same map; "servers" is VS Code's name)`}
	case raw.MCPServers == nil && raw.Servers != nil:
		raw.MCPServers = raw.Servers
	case raw.MCPServers == nil:
		return nil, &ConfigError{File: file, Field: "mcpServers", Problem: `missing: the file must be {"mcpServers": {"name": {...}}} (or VS Code's {"servers": {...}})`}
	}
	cfg := &Config{File: file, FindToolAfter: DefaultFindToolAfter}
	cfg.Warnings = append(cfg.Warnings, unknownFields(data, knownTop, file+": ")...)
	if raw.FindToolAfter != nil {
		// 0 always offers find_tool, a negative number never does (gate.WithSource).
		cfg.FindToolAfter = *raw.FindToolAfter
	}
	names := make([]string, 0, len(raw.MCPServers))
	for n := range raw.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		s, warns, err := parseServer(file, name, raw.MCPServers[name], getenv)
		cfg.Warnings = append(cfg.Warnings, warns...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Servers = append(cfg.Servers, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

func parseServer(file, name string, data json.RawMessage, getenv func(string) string) (Server, []string, error) {
	cerr := func(field, problem string) error {
		return &ConfigError{File: file, Server: name, Field: field, Problem: problem}
	}
	if !serverName.MatchString(name) {
		return Server{}, nil, cerr("", "name must be 1-32 letters, digits, _ or - (it prefixes the tool names the model sees)")
	}
	if strings.Contains(name, "__") || strings.HasSuffix(name, "_") {
		// A trailing "_" would make server "a_" with tool "x" and server
		// "a" with tool "_x" both "a___x".
		return Server{}, nil, cerr("", `name must not contain "__" nor end in "_" (it separates server and tool in tool names)`)
	}
	var r rawServer
	if err := json.Unmarshal(data, &r); err != nil {
		return Server{}, nil, cerr("", "not a valid server object: "+err.Error())
	}
	warns := unknownFields(data, knownServer, "server "+name+": ")
	var toolsRaw struct {
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(data, &toolsRaw) == nil && len(toolsRaw.Tools) > 0 && !bytes.Equal(toolsRaw.Tools, []byte("null")) {
		warns = append(warns, unknownFields(toolsRaw.Tools, knownTools, "server "+name+": tools: ")...)
	}
	for i := range warns {
		warns[i] = file + ": " + warns[i]
	}
	s := Server{Name: name, Disabled: r.Disabled, Command: r.Command, Args: r.Args, Cwd: r.Cwd, URL: r.URL, Channels: r.Channels, Timeout: DefaultTimeout}
	switch {
	case r.Command != "" && r.URL != "":
		return Server{}, warns, cerr("command", `both "command" and "url" are set: a server is either stdio (command) or remote (url)`)
	case r.Command != "":
		s.Type = Stdio
	case r.URL != "":
		s.Type = HTTP
	default:
		return Server{}, warns, cerr("command", `neither "command" (a stdio server) nor "url" (a remote server) is set`)
	}
	switch t := strings.ToLower(r.Type); t {
	case "":
	case "stdio":
		if s.Type != Stdio {
			return Server{}, warns, cerr("type", `"stdio" needs "command"`)
		}
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		if s.Type != HTTP {
			return Server{}, warns, cerr("type", `"`+r.Type+`" needs "url"`)
		}
	case "sse":
		if s.Type != HTTP {
			return Server{}, warns, cerr("type", `"sse" needs "url"`)
		}
		s.Type = SSE
	default:
		return Server{}, warns, cerr("type", fmt.Sprintf("unknown type %q (want stdio, http or sse)", r.Type))
	}
	var err error
	if s.Env, err = expandMap(r.Env, getenv, &s.secrets); err != nil {
		return Server{}, warns, cerr("env."+err.(*expandError).key, err.(*expandError).msg)
	}
	if s.Headers, err = expandMap(r.Headers, getenv, &s.secrets); err != nil {
		return Server{}, warns, cerr("headers."+err.(*expandError).key, err.(*expandError).msg)
	}
	if r.Tools != nil {
		s.Include, s.Exclude = r.Tools.Include, r.Tools.Exclude
		for _, g := range slices.Concat(s.Include, s.Exclude) {
			if _, err := path.Match(g, ""); err != nil {
				return Server{}, warns, cerr("tools", fmt.Sprintf("bad glob %q: %v", g, err))
			}
		}
	}
	if len(r.Consequences) > 0 {
		s.Consequences = make(map[string]core.Consequence, len(r.Consequences))
		for tool, c := range r.Consequences {
			cons := core.Consequence(strings.ToLower(c))
			if !cons.Valid() {
				return Server{}, warns, cerr("consequences."+tool, fmt.Sprintf("unknown consequence %q (want read, write, send or irreversible)", c))
			}
			if _, err := path.Match(tool, ""); err != nil {
				return Server{}, warns, cerr("consequences."+tool, fmt.Sprintf("bad glob: %v", err))
			}
			s.Consequences[tool] = cons
		}
	}
	if len(r.Rooms) > 0 {
		s.Rooms = make(map[string]string, len(r.Rooms))
		for tool, arg := range r.Rooms {
			if _, err := path.Match(tool, ""); err != nil {
				return Server{}, warns, cerr("rooms."+tool, fmt.Sprintf("bad glob: %v", err))
			}
			if strings.TrimSpace(arg) == "" {
				return Server{}, warns, cerr("rooms."+tool, "want the name of the argument that holds the room (a channel id)")
			}
			s.Rooms[tool] = strings.TrimSpace(arg)
		}
	}
	switch strings.ToLower(r.Identity) {
	case "", IdentityBot:
		s.Identity = IdentityBot
	case IdentityPerson:
		if s.Type == Stdio {
			return Server{}, warns, cerr("identity", `"person" needs a remote server ("url"): a stdio server has no OAuth sign-in`)
		}
		s.Identity = IdentityPerson
	default:
		return Server{}, warns, cerr("identity", fmt.Sprintf("unknown identity %q (want bot or person)", r.Identity))
	}
	if r.OAuth != nil {
		if s.Identity != IdentityPerson {
			return Server{}, warns, cerr("oauth", `"oauth" is for "identity": "person" servers`)
		}
		oauth, err := expandMap(map[string]string{"clientId": r.OAuth.ClientID, "clientSecret": r.OAuth.ClientSecret}, getenv, &s.secrets)
		if err != nil {
			return Server{}, warns, cerr("oauth."+err.(*expandError).key, err.(*expandError).msg)
		}
		s.OAuthClientID, s.OAuthClientSecret = oauth["clientId"], oauth["clientSecret"]
		if s.OAuthClientID == "" && s.OAuthClientSecret != "" {
			return Server{}, warns, cerr("oauth.clientId", `"clientSecret" without "clientId"`)
		}
	}
	if len(r.Timeout) > 0 && !bytes.Equal(r.Timeout, []byte("null")) {
		d, err := parseTimeout(r.Timeout)
		if err != nil {
			return Server{}, warns, cerr("timeout", err.Error())
		}
		s.Timeout = d
	}
	return s, warns, nil
}

// parseTimeout accepts seconds (a number) or a Go duration ("90s", "2m").
func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	var secs float64
	if err := json.Unmarshal(raw, &secs); err == nil {
		if secs <= 0 {
			return 0, errors.New("must be more than 0 seconds")
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, errors.New(`want seconds (a number) or a duration such as "90s"`)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf(`%q is not a positive duration such as "90s"`, s)
	}
	return d, nil
}

type expandError struct{ key, msg string }

func (e *expandError) Error() string { return e.key + ": " + e.msg }

var varRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// expandMap fills ${VAR} from getenv. An unset (or empty) variable is an
// error: a server started without its token fails later and less clearly.
// minSecret is the shortest ${VAR} value masked in a server's output:
// shorter ones ("1", "dev") would garble it and are no secret.
const minSecret = 6

func expandMap(m map[string]string, getenv func(string) string, secrets *[]string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		var problem string
		expanded := varRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := varRef.FindStringSubmatch(ref)[1]
			// ${env:VAR} is how VS Code and Cursor write ${VAR}.
			name = strings.TrimPrefix(name, "env:")
			if strings.HasPrefix(name, "input:") {
				if problem == "" {
					problem = fmt.Sprintf("%s is a VS Code input (a prompt), which Marlowe cannot show: put the value in .env as VAR=… and write ${VAR}", ref)
				}
				return ""
			}
			if name == "" || strings.ContainsAny(name, " ${:") {
				if problem == "" {
					problem = fmt.Sprintf("%q is not a variable reference", ref)
				}
				return ""
			}
			val := getenv(name)
			if val == "" && problem == "" {
				problem = fmt.Sprintf("${%s} is not set in Marlowe's environment (set it in .env)", name)
			}
			if len(val) >= minSecret {
				*secrets = append(*secrets, val)
			}
			return val
		})
		if problem != "" {
			return nil, &expandError{key: k, msg: problem}
		}
		out[k] = expanded
	}
	return out, nil
}

// unknownFields lists top-level keys of obj not in known.
func unknownFields(obj []byte, known []string, prefix string) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil
	}
	var out []string
	for k := range m {
		if !slices.Contains(known, k) {
			out = append(out, fmt.Sprintf("%sunknown field %q ignored", prefix, k))
		}
	}
	sort.Strings(out)
	return out
}

// jsonProblem says where a JSON syntax error is, by line and column.
func jsonProblem(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := 1, 1
		for _, b := range data[:min(int(se.Offset), len(data))] {
			if b == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Sprintf("%v (line %d, column %d)", se, line, col)
	}
	return err.Error()
}

// Offers reports whether the server is offered in channel ch.
func (s Server) Offers(ch core.ChannelKey) bool {
	if len(s.Channels) == 0 {
		return true
	}
	key := string(ch)
	id := key[strings.LastIndexByte(key, '/')+1:]
	for _, c := range s.Channels {
		if c == key || c == id {
			return true
		}
	}
	return false
}

// Wants reports whether the server's include/exclude globs keep tool.
func (s Server) Wants(tool string) bool {
	for _, g := range s.Exclude {
		if ok, _ := path.Match(g, tool); ok {
			return false
		}
	}
	if len(s.Include) == 0 {
		return true
	}
	for _, g := range s.Include {
		if ok, _ := path.Match(g, tool); ok {
			return true
		}
	}
	return false
}

// Override returns the operator's consequence for tool, if any: an exact
// name wins over a glob.
func (s Server) Override(tool string) (core.Consequence, bool) {
	return byToolName(s.Consequences, tool)
}

// RoomArg returns the argument of tool that picks a room on the bot's
// platform ("rooms"), if any: an exact name wins over a glob.
func (s Server) RoomArg(tool string) (string, bool) {
	return byToolName(s.Rooms, tool)
}

// byToolName looks tool up in m, whose keys are tool names or globs: an
// exact name wins, then the first matching glob in sorted order.
func byToolName[V any](m map[string]V, tool string) (V, bool) {
	if v, ok := m[tool]; ok {
		return v, true
	}
	globs := make([]string, 0, len(m))
	for g := range m {
		globs = append(globs, g)
	}
	sort.Strings(globs)
	for _, g := range globs {
		if ok, _ := path.Match(g, tool); ok {
			return m[g], true
		}
	}
	var zero V
	return zero, false
}
