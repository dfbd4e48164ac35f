package controller

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/fleetcast/autoscaler/apiauth"
)

// The web page: GET /ui, server-rendered HTML with SVG charts drawn in Go,
// readable without JavaScript; a small inline script, where JavaScript
// runs, refreshes its content in place every 30 seconds (GET
// /ui?fragment=1). It loads nothing else: its CSS and script are inline,
// allowed by their hashes in its Content-Security-Policy.
//
// Who may see it: GET /ui is an apiauth.ReadOrSession route. On loopback
// (the router's OpenReads) it is open, as the /v1/ reads are; a request
// with a bearer token is judged as a read (a read token, or an
// operator's); and a browser, which sends no token, shows the session
// cookie GET /ui/login's form trades a read token for (uiSessions). The
// login and logout routes are Public: they carry nothing but the form,
// and check what is posted themselves. The cookie is good for GET /ui
// alone: the router's other routes read bearer tokens only.

//go:embed ui/page.html ui/login.html ui/style.css ui/refresh.js
var uiFiles embed.FS

// The web page's routes.
const (
	UIPattern       = "GET /ui"
	UILoginPattern  = "GET /ui/login"
	UIPostPattern   = "POST /ui/login"
	UILogoutPattern = "POST /ui/logout"
)

// uiServer serves the web page.
type uiServer struct {
	c        *Controller
	rt       *apiauth.Router
	tokens   *apiauth.Tokens
	sessions *uiSessions
	tmpl     *template.Template
	css      template.CSS
	js       template.JS
	csp      string
	// origin refuses cross-origin form posts (a login or logout another
	// site's page would make).
	origin *http.CrossOriginProtection
}

// uiRoutes adds the web page's routes to rt.
func (c *Controller) uiRoutes(rt *apiauth.Router, tokens *apiauth.Tokens) {
	u := newUIServer(c, rt, tokens)
	rt.HandleFunc(UIPattern, apiauth.ReadOrSession, u.serve)
	rt.HandleFunc(UILoginPattern, apiauth.Public, u.loginForm)
	rt.HandleFunc(UIPostPattern, apiauth.Public, u.login)
	rt.HandleFunc(UILogoutPattern, apiauth.Public, u.logout)
}

func newUIServer(c *Controller, rt *apiauth.Router, tokens *apiauth.Tokens) *uiServer {
	read := func(name string) string {
		b, err := uiFiles.ReadFile(name)
		if err != nil {
			panic("controller: embedded " + name + ": " + err.Error()) // it is embedded: cannot happen
		}
		return string(b)
	}
	css, js := read("ui/style.css"), read("ui/refresh.js")
	hash := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
	}
	funcs := template.FuncMap{
		"dollars": uiDollars, "tenths": uiTenths, "count": uiCount, "queue": uiQueue,
		"time": uiTime, "ago": uiAgo, "rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"key": func(parts ...string) string { return strings.Join(parts, ":") },
	}
	return &uiServer{c: c, rt: rt, tokens: tokens, sessions: newUISessions(tokens, c.now),
		tmpl: template.Must(template.New("ui").Funcs(funcs).ParseFS(uiFiles, "ui/*.html")),
		css:  template.CSS(css), js: template.JS(js),
		csp: "default-src 'none'; style-src " + hash(css) + "; script-src " + hash(js) +
			"; connect-src 'self'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		origin: http.NewCrossOriginProtection()}
}

// uiDoc is what a whole page's template gets: the page, or the login's
// form, with the inline CSS and script.
type uiDoc struct {
	uiPage
	CSS template.CSS
	JS  template.JS
	// Error is why a login was refused.
	Error string
}

// headers sets what every answer of the web page carries.
func (u *uiServer) headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", u.csp)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// render answers with template name executed on data, whole or not at
// all.
func (u *uiServer) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := u.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		u.c.log.Error("web page", "template", name, "error", err)
		http.Error(w, "the page could not be made (the controller's log says why)", http.StatusInternalServerError)
		return
	}
	u.headers(w)
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// serve answers GET /ui: the page, or with ?fragment=1 its content
// alone (what the script swaps in).
func (u *uiServer) serve(w http.ResponseWriter, r *http.Request) {
	_, token := apiauth.Caller(r.Context())
	session := false
	if !u.rt.OpenReads && !token {
		if _, session = u.sessions.fromRequest(r); !session {
			if _, err := r.Cookie(uiCookie); err == nil {
				http.SetCookie(w, uiClearCookie(r))
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
	}
	pg := u.c.uiPage(u.c.now())
	pg.Session, pg.Open = session, u.rt.OpenReads
	if r.URL.Query().Get("fragment") == "1" {
		w.Header().Set("Fleetcast-Fragment", "1")
		u.render(w, http.StatusOK, "content", pg)
		return
	}
	u.render(w, http.StatusOK, "page", uiDoc{uiPage: pg, CSS: u.css, JS: u.js})
}

// loginForm answers GET /ui/login: the form, or the page for a browser
// logged in already.
func (u *uiServer) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := u.sessions.fromRequest(r); ok {
		http.Redirect(w, r, "/ui", http.StatusSeeOther)
		return
	}
	u.form(w, r, http.StatusOK, "")
}

// form answers with the login form, and why the last try was refused.
func (u *uiServer) form(w http.ResponseWriter, r *http.Request, status int, why string) {
	u.render(w, status, "login", uiDoc{uiPage: uiPage{Fleet: u.c.ctl.Fleet, Open: u.rt.OpenReads}, CSS: u.css, Error: why})
}

// login answers POST /ui/login: the form's token, if it may read, is
// traded for a session cookie. The token is never written back.
func (u *uiServer) login(w http.ResponseWriter, r *http.Request) {
	if err := u.origin.Check(r); err != nil {
		u.form(w, r, http.StatusForbidden, "This form was posted from another site's page: log in from this one.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		u.form(w, r, http.StatusBadRequest, "The form could not be read: post it from this page.")
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if secret == "" {
		u.form(w, r, http.StatusBadRequest, "Paste an API token of scope read.")
		return
	}
	tok, ok := u.tokens.Check(secret)
	if !ok {
		u.c.log.Info("web page login refused: unknown token", "remote", r.RemoteAddr)
		u.form(w, r, http.StatusForbidden, "This controller holds no such API token: it is wrong, revoked, or rotated out.")
		return
	}
	if !tok.Scope.Allows(apiauth.Read) {
		u.c.log.Warn("web page login refused: wrong scope", "token", tok.Name, "scope", tok.Scope, "remote", r.RemoteAddr)
		u.form(w, r, http.StatusForbidden, "The API token "+tok.Name+" has scope "+string(tok.Scope)+": the page needs one of scope read (or operator).")
		return
	}
	value, expires, ok := u.sessions.issue(tok)
	if !ok {
		u.form(w, r, http.StatusForbidden, "This controller holds no such API token: it is wrong, revoked, or rotated out.")
		return
	}
	u.c.log.Info("web page login", "token", tok.Name, "remote", r.RemoteAddr, "until", expires.UTC())
	http.SetCookie(w, uiSessionCookie(r, value, expires))
	http.Redirect(w, r, "/ui", http.StatusSeeOther)
}

// logout answers POST /ui/logout: the session ends, and its cookie is
// deleted.
func (u *uiServer) logout(w http.ResponseWriter, r *http.Request) {
	if err := u.origin.Check(r); err != nil {
		http.Error(w, "a cross-origin logout is refused: log out from the page", http.StatusForbidden)
		return
	}
	if sess, ok := u.sessions.fromRequest(r); ok {
		u.sessions.logOut(sess)
		u.c.log.Info("web page logout", "token", sess.Token, "remote", r.RemoteAddr)
	}
	http.SetCookie(w, uiClearCookie(r))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
