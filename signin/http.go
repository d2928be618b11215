package signin

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"strings"
)

// The browser side. GET /connect shows what the link is for and a button:
// link unfurlers and preview fetchers only GET, so they never use a link
// up. POST /connect, from that page only (a cross-site POST is refused),
// marks the link used, binds the browser with a cookie
// and redirects to the authorization server. GET /connect/callback needs
// that same cookie: a callback completed in another browser is refused.

const cookieName = "marlowe_signin"

var page = template.Must(template.New("p").Parse(`<!doctype html><html><head><meta charset="utf-8">
<meta name="referrer" content="no-referrer"><title>Marlowe: {{.Title}}</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 3em auto">
<h1>{{.Title}}</h1><p>{{.Text}}</p>
{{if .Token}}<form method="post" action="{{.Action}}"><input type="hidden" name="t" value="{{.Token}}">
<button type="submit">Continue to {{.Server}}</button></form>{{end}}
</body></html>`))

type pageData struct{ Title, Text, Token, Action, Server string }

func render(w http.ResponseWriter, code int, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(code)
	_ = page.Execute(w, d)
}

// Handler serves StartPath and CallbackPath.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StartPath, s.landing)
	mux.HandleFunc("POST "+StartPath, s.start)
	mux.HandleFunc("GET "+CallbackPath, s.callback)
	mux.HandleFunc("GET "+ClientMetadataPath, s.clientMetadata)
	return mux
}

// clientMetadata serves Marlowe's client ID metadata document: an
// authorization server that accepts them fetches it to learn the client
// (its one exact redirect URI, a public client with PKCE). It holds no
// secret. Without an https PUBLIC_URL there is none.
func (s *Service) clientMetadata(w http.ResponseWriter, r *http.Request) {
	id := s.cfg.Links.ClientMetadataURL()
	if id == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id": id, "client_name": "Marlowe", "client_uri": s.cfg.Links.base,
		"redirect_uris": []string{s.cfg.Links.RedirectURI()}, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "none",
	})
}

func (s *Service) landing(w http.ResponseWriter, r *http.Request) {
	t := r.URL.Query().Get("t")
	c, err := s.cfg.Links.Check(t, s.cfg.Now())
	if err != nil {
		render(w, http.StatusBadRequest, pageData{Title: "Sign-in refused", Text: err.Error()})
		return
	}
	render(w, http.StatusOK, pageData{Title: "Connect " + c.Server,
		Text:  "Marlowe will act on " + c.Server + " as you (" + c.Person + ") when you ask it to. Continue only if this link came to you in your own direct message with Marlowe.",
		Token: t, Action: s.cfg.Links.sitePath(StartPath), Server: c.Server})
}

func (s *Service) start(w http.ResponseWriter, r *http.Request) {
	// Only the landing page's own form starts a sign-in: another site
	// auto-submitting someone's link (its own person's) in a victim's
	// browser would sign the victim in, at a server that skips consent
	// for a known client, for the link's person, who then confirms the
	// victim's account as theirs. Browsers say where a POST came from
	// (Sec-Fetch-Site, Origin); the link is not used up.
	if err := s.crossOrigin.Check(r); err != nil {
		render(w, http.StatusForbidden, pageData{Title: "Sign-in refused",
			Text: "This sign-in was sent from another web site. Open the link from your direct message with Marlowe and press Continue there."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	browser := rand.Text() + rand.Text()
	authURL, c, err := s.Start(r.Context(), r.PostFormValue("t"), browser)
	if err != nil {
		code := http.StatusBadRequest
		if !isRefusal(err) {
			code = http.StatusBadGateway
			s.cfg.Log.Warn("sign-in could not start", "link", c.ID, "server", c.Server, "error", err)
		}
		render(w, code, pageData{Title: "Sign-in refused", Text: err.Error()})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: browser, Path: s.cfg.Links.sitePath(StartPath), HttpOnly: true,
		Secure: strings.HasPrefix(s.cfg.Links.base, "https://"), SameSite: http.SameSiteLaxMode, MaxAge: int(flowTTL.Seconds())})
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	browser := ""
	if ck, err := r.Cookie(cookieName); err == nil {
		browser = ck.Value
	}
	conn, err := s.Callback(r.Context(), r.URL.Query(), browser)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: s.cfg.Links.sitePath(StartPath), MaxAge: -1})
	if err != nil {
		code := http.StatusBadRequest
		if !isRefusal(err) {
			code = http.StatusBadGateway
			s.cfg.Log.Warn("sign-in failed", "error", err)
		}
		render(w, code, pageData{Title: "Sign-in failed", Text: err.Error()})
		return
	}
	render(w, http.StatusOK, pageData{Title: "Signed in to " + conn.Server + ": one more step",
		Text: "Marlowe has sent " + conn.Person + " a card in their direct message with it, showing which " + conn.Server +
			" account this was. Nothing is connected until they confirm it there. You can close this page."})
}

func isRefusal(err error) bool {
	for _, e := range []error{ErrLinkInvalid, ErrLinkExpired, ErrLinkUsed, ErrStateUnknown, ErrOtherBrowser, ErrWrongIssuer, ErrDeniedAtServer} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
