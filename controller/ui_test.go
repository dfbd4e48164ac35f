package controller

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/apiauth"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/nodeauth/nodeauthtest"
)

// TestUILoginForm: the form trades a token that may read (read or
// operator) for a session cookie, HttpOnly, SameSite=Strict, on /ui,
// expiring in 12 hours (Secure over TLS), whose value is not the token;
// it refuses every other with a reason and never writes the token back.
func TestUILoginForm(t *testing.T) {
	r := newUIRig(t, false)
	for _, tt := range []struct {
		name   string
		form   url.Values
		header map[string]string
		tls    bool
		status int
		// says is what the refusal's form says.
		says string
	}{
		{"a read token", url.Values{"token": {r.secrets[apiauth.Read]}}, nil, false, http.StatusSeeOther, ""},
		{"a read token, padded", url.Values{"token": {"  " + r.secrets[apiauth.Read] + "\n"}}, nil, false, http.StatusSeeOther, ""},
		{"a read token over TLS", url.Values{"token": {r.secrets[apiauth.Read]}}, nil, true, http.StatusSeeOther, ""},
		{"an operator token", url.Values{"token": {r.secrets[apiauth.Operator]}}, nil, false, http.StatusSeeOther, ""},
		{"the root token", url.Values{"token": {nodeauthtest.RootToken}}, nil, false, http.StatusSeeOther, ""},
		{"a demand token", url.Values{"token": {r.secrets[apiauth.Demand]}}, nil, false, http.StatusForbidden, "has scope demand: the page needs one of scope read"},
		{"an unknown token", url.Values{"token": {"fca1.not-a-token-this-controller-holds"}}, nil, false, http.StatusForbidden, "holds no such API token"},
		{"no token", url.Values{}, nil, false, http.StatusBadRequest, "Paste an API token"},
		{"a form too large", url.Values{"token": {strings.Repeat("x", 5000)}}, nil, false, http.StatusBadRequest, "could not be read"},
		{"from another site", url.Values{"token": {r.secrets[apiauth.Read]}}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, false, http.StatusForbidden, "another site"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(tt.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.tls {
				req.TLS = &tls.ConnectionState{}
			}
			w := r.do(req)
			body := w.Body.String()
			if w.Code != tt.status || !strings.Contains(body, tt.says) {
				t.Fatalf("%d %q; want %d saying %q", w.Code, body, tt.status, tt.says)
			}
			for _, secret := range tt.form["token"] {
				if s := strings.TrimSpace(secret); len(s) > 8 && (strings.Contains(body, s) || strings.Contains(w.Header().Get("Set-Cookie"), s)) {
					t.Errorf("the answer holds the token it was given")
				}
			}
			cookies := w.Result().Cookies()
			if tt.status != http.StatusSeeOther {
				if len(cookies) > 0 {
					t.Errorf("a refused login set cookies %v", cookies)
				}
				return
			}
			if w.Header().Get("Location") != "/ui" || len(cookies) != 1 {
				t.Fatalf("location %q, cookies %v; want /ui and one cookie", w.Header().Get("Location"), cookies)
			}
			c := cookies[0]
			if c.Name != uiCookie || c.Path != "/ui" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tt.tls ||
				c.MaxAge != int(uiSessionLife/time.Second) || !c.Expires.Equal(r.l.now.Add(uiSessionLife)) {
				t.Errorf("cookie %s; want %s, path /ui, HttpOnly, SameSite=Strict, Secure %v, Max-Age %d, expiring at %v", w.Header().Get("Set-Cookie"), uiCookie, tt.tls, int(uiSessionLife/time.Second), r.l.now.Add(uiSessionLife))
			}
			if page := r.get("/ui", c, ""); page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `action="/ui/logout"`) {
				t.Errorf("the page with the session: %d, want 200 with a logout button", page.Code)
			}
		})
	}
}

// TestUISession: GET /ui takes a good session and sends every other
// browser to the login form: no cookie, a cookie altered or signed by
// another process, expired, logged out, or made from a token revoked,
// rotated or out of its rotation's grace since. The cookie opens nothing
// but /ui.
func TestUISession(t *testing.T) {
	for _, tt := range []struct {
		name string
		// cookie logs in (or not) and does what the case says.
		cookie func(t *testing.T, r *uiRig) *http.Cookie
		ok     bool
	}{
		{"none", func(*testing.T, *uiRig) *http.Cookie { return nil }, false},
		{"a good session", func(t *testing.T, r *uiRig) *http.Cookie { return r.login(t, r.secrets[apiauth.Read]) }, true},
		{"the root token's, 11 hours on", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, nodeauthtest.RootToken)
			r.l.now = r.l.now.Add(11 * time.Hour)
			return c
		}, true},
		{"expired", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			r.l.now = r.l.now.Add(uiSessionLife)
			return c
		}, false},
		{"its session altered", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			p, mac, _ := strings.Cut(c.Value, ".")
			raw, _ := base64.RawURLEncoding.DecodeString(p)
			raw = []byte(strings.Replace(string(raw), `"exp":`, `"exp":9`, 1))
			c.Value = base64.RawURLEncoding.EncodeToString(raw) + "." + mac
			return c
		}, false},
		{"its signature altered", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			b := []byte(c.Value)
			if b[len(b)-2] == 'A' {
				b[len(b)-2] = 'B'
			} else {
				b[len(b)-2] = 'A'
			}
			c.Value = string(b)
			return c
		}, false},
		{"not a session", func(*testing.T, *uiRig) *http.Cookie { return &http.Cookie{Name: uiCookie, Value: "fca1.abc"} }, false},
		{"signed by another process", func(t *testing.T, r *uiRig) *http.Cookie {
			other := &uiRig{l: r.l, tokens: r.tokens, secrets: r.secrets, h: r.l.c.Handler(APIOptions{Tokens: r.tokens})}
			return other.login(t, r.secrets[apiauth.Read])
		}, false},
		{"logged out", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			w := r.post("/ui/logout", nil, c)
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login" || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
				t.Fatalf("logout: %d %q %q", w.Code, w.Header().Get("Location"), w.Header().Get("Set-Cookie"))
			}
			return c
		}, false},
		{"its token revoked", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			if _, err := r.tokens.Revoke(string(apiauth.Read), "root"); err != nil {
				t.Fatal(err)
			}
			return c
		}, false},
		{"its token revoked and made again", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			if _, err := r.tokens.Revoke(string(apiauth.Read), "root"); err != nil {
				t.Fatal(err)
			}
			r.clock = r.clock.Add(time.Second)
			if _, _, err := r.tokens.Create(string(apiauth.Read), apiauth.Read, "root"); err != nil {
				t.Fatal(err)
			}
			return c
		}, false},
		{"its token rotated", func(t *testing.T, r *uiRig) *http.Cookie {
			c := r.login(t, r.secrets[apiauth.Read])
			if _, _, err := r.tokens.Rotate(string(apiauth.Read), 0, "root"); err != nil {
				t.Fatal(err)
			}
			return c
		}, false},
		{"made in a rotation's grace, within it", func(t *testing.T, r *uiRig) *http.Cookie {
			if _, _, err := r.tokens.Rotate(string(apiauth.Read), time.Hour, "root"); err != nil {
				t.Fatal(err)
			}
			return r.login(t, r.secrets[apiauth.Read]) // the old secret
		}, true},
		{"made in a rotation's grace, after it", func(t *testing.T, r *uiRig) *http.Cookie {
			if _, _, err := r.tokens.Rotate(string(apiauth.Read), time.Hour, "root"); err != nil {
				t.Fatal(err)
			}
			c := r.login(t, r.secrets[apiauth.Read])
			r.clock = r.clock.Add(time.Hour)
			return c
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newUIRig(t, false)
			c := tt.cookie(t, r)
			w := r.get("/ui", c, "")
			if got := w.Code == http.StatusOK; got != tt.ok {
				t.Fatalf("GET /ui: %d (location %q); want served %v", w.Code, w.Header().Get("Location"), tt.ok)
			}
			if !tt.ok && (w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login") {
				t.Errorf("GET /ui: %d to %q; want 303 to /ui/login", w.Code, w.Header().Get("Location"))
			}
			if c == nil {
				return
			}
			if frag := r.get("/ui?fragment=1", c, ""); (frag.Code == http.StatusOK) != tt.ok {
				t.Errorf("GET /ui?fragment=1: %d; want served %v", frag.Code, tt.ok)
			}
			// The cookie is the page's alone: the JSON API wants a token.
			for _, path := range []string{"/v1/plan", "/v1/fleet", "/v1/usage", "/v1/api-tokens"} {
				if w := r.get(path, c, ""); w.Code != http.StatusUnauthorized {
					t.Errorf("GET %s with the cookie alone: %d, want 401", path, w.Code)
				}
			}
		})
	}
}

// TestUIAccess: on loopback (open reads) the page is served to anyone;
// otherwise to a bearer token that may read, as GET /v1/ reads are, and
// the login form says when it is not needed.
func TestUIAccess(t *testing.T) {
	for _, tt := range []struct {
		name     string
		open     bool
		bearer   func(*uiRig) string
		status   int
		location string
	}{
		{"loopback, no token", true, func(*uiRig) string { return "" }, http.StatusOK, ""},
		{"loopback, a demand token", true, func(r *uiRig) string { return r.secrets[apiauth.Demand] }, http.StatusOK, ""},
		{"off loopback, no token", false, func(*uiRig) string { return "" }, http.StatusSeeOther, "/ui/login"},
		{"off loopback, a read token", false, func(r *uiRig) string { return r.secrets[apiauth.Read] }, http.StatusOK, ""},
		{"off loopback, an operator token", false, func(r *uiRig) string { return r.secrets[apiauth.Operator] }, http.StatusOK, ""},
		{"off loopback, a demand token", false, func(r *uiRig) string { return r.secrets[apiauth.Demand] }, http.StatusForbidden, ""},
		{"off loopback, an unknown token", false, func(*uiRig) string { return "fca1.nope" }, http.StatusUnauthorized, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newUIRig(t, tt.open)
			w := r.get("/ui", nil, tt.bearer(r))
			if w.Code != tt.status || w.Header().Get("Location") != tt.location {
				t.Fatalf("%d to %q; want %d to %q (%s)", w.Code, w.Header().Get("Location"), tt.status, tt.location, w.Body)
			}
			if w.Code == http.StatusOK && (!strings.Contains(w.Body.String(), "No control cycle yet") || strings.Contains(w.Body.String(), `action="/ui/logout"`)) {
				t.Errorf("the page before a cycle, with no session: %s", w.Body)
			}
			form := r.get("/ui/login", nil, "")
			if form.Code != http.StatusOK || strings.Contains(form.Body.String(), "without a token") != tt.open {
				t.Errorf("the login form: %d, says it is not needed %v; want %v", form.Code, !tt.open, tt.open)
			}
		})
	}
}

// TestUIEscapes: what the page shows of the fleet is escaped: a team or
// node named as markup is text, in the page and in its hooks.
func TestUIEscapes(t *testing.T) {
	r := newUIRig(t, true)
	evil := `<script>alert("x")</script>`
	c := r.l.c
	c.mu.Lock()
	c.lastCycle = r.l.now
	c.lastState = &fleet.State{Nodes: []fleet.Node{{ID: "n1", Pool: `<b>gone</b>`, State: fleet.Ready, GPUs: 2,
		Jobs: []fleet.Job{{ID: "j1", GPUs: 1, Team: evil}}}}}
	c.mu.Unlock()
	body := r.get("/ui", nil, "").Body.String()
	if strings.Count(body, "<script") != 1 || strings.Contains(body, "<b>gone") {
		t.Fatalf("markup from the fleet reached the page:\n%s", body)
	}
	for _, want := range []string{`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`, `data-k="team:&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;:gpus"`, `&lt;b&gt;gone&lt;/b&gt;`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	hooks, err := uiHooks(body)
	if err != nil {
		t.Fatal(err)
	}
	if h := hooks["team:"+evil+":gpus"]; h.text != "1" {
		t.Errorf("the team's GPUs read back as %q, want 1", h.text)
	}
}

// TestUIHeaders: the page loads nothing from elsewhere, and its
// Content-Security-Policy allows its inline CSS and script by their
// hashes and nothing else; the fragment the script fetches is the
// content alone.
func TestUIHeaders(t *testing.T) {
	r := newUIFleet(t, true)
	w := r.get("/ui", nil, "")
	body, h := w.Body.String(), w.Header()
	csp := h.Get("Content-Security-Policy")
	for k, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Content-Type": "text/html; charset=utf-8"} {
		if h.Get(k) != want {
			t.Errorf("%s: %q, want %q", k, h.Get(k), want)
		}
	}
	for _, tag := range []string{"style", "script"} {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(body, -1)
		if len(m) != 1 {
			t.Fatalf("%d <%s> elements, want 1", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		want := tag + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if !strings.Contains(csp, want+";") {
			t.Errorf("CSP %q lacks %s", csp, want)
		}
	}
	if !strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
		t.Errorf("CSP %q", csp)
	}
	for _, m := range regexp.MustCompile(`\b(src|href|action)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(m[2], "/") && m[2] != "data:," {
			t.Errorf("%s=%q: the page loads or links elsewhere", m[1], m[2])
		}
	}
	if strings.Contains(body, " style=") {
		t.Error("an inline style attribute, which the CSP refuses")
	}
	f := r.get("/ui?fragment=1", nil, "")
	frag := f.Body.String()
	if f.Code != http.StatusOK || f.Header().Get("Fleetcast-Fragment") != "1" || strings.Contains(frag, "<html") || strings.Contains(frag, "<script") || !strings.Contains(frag, `data-k="plan:cost_before"`) {
		t.Errorf("the fragment: %d %q:\n%.300s", f.Code, f.Header().Get("Fleetcast-Fragment"), frag)
	}
	if f.Header().Get("Content-Security-Policy") != csp {
		t.Error("the fragment lacks the page's CSP")
	}
}

// TestUIFigures: every figure the page hooks is the JSON API's, and every
// figure the API has for the page's sections is on it.
func TestUIFigures(t *testing.T) {
	for _, open := range []bool{true, false} {
		r := newUIFleet(t, open)
		page := r.get("/ui", nil, r.secrets[apiauth.Read])
		if page.Code != http.StatusOK {
			t.Fatalf("GET /ui: %d", page.Code)
		}
		uiCheckFigures(t, page.Body.String(), func(path string) []byte {
			w := r.get(path, nil, r.secrets[apiauth.Read])
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
			}
			return w.Body.Bytes()
		}, uiMustShow...)
		// The page shows allocated-idle as the books have it: beta's
		// first 40 minutes of 2 GPUs idle before execution ($4 a GPU-hour),
		// alpha's stalled quarters of the past days.
		hooks, err := uiHooks(page.Body.String())
		if err != nil {
			t.Fatal(err)
		}
		if got := hooks["queue:beta:idle_before_execution_cost"].text; got != "$5.33" {
			t.Errorf("beta idle before execution: %q, want $5.33", got)
		}
		if got := hooks["queue:alpha:stalled_cost"].text; got == "" || got == "$0.00" {
			t.Errorf("alpha stalled: %q, want some", got)
		}
	}
}

// TestUIFormats: the page's numbers read back as what they show.
func TestUIFormats(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{uiDollars(0), "$0.00"}, {uiDollars(1234.565), "$1,234.57"}, {uiDollars(-2.5), "-$2.50"}, {uiDollars(-0.001), "$0.00"},
		{uiDollars(1e6), "$1,000,000.00"}, {uiTenths(999.96), "1,000.0"}, {uiTenths(0.04), "0.0"}, {uiCount(1234567), "1,234,567"},
		{uiCount(-1000), "-1,000"}, {uiQueue(0, 0), "-"}, {uiQueue(0, 1), "0s"}, {uiQueue(59.4, 1), "59s"}, {uiQueue(250, 2), "4m 10s"},
		{uiQueue(3600+299, 1), "1h 05m"}, {uiQueue(3*86400+4*3600+100, 1), "3d 4h"}, {uiLevel(0.5), "p50"}, {uiLevel(0.975), "p97.5"},
		{uiTime(t0), "Mon 30 Nov 10:00 UTC"}, {uiAgo(t0, t0.Add(90*time.Second)), "1m 30s ago"},
	} {
		if tt.got != tt.want {
			t.Errorf("%q, want %q", tt.got, tt.want)
		}
	}
	for _, s := range []float64{0, 7, 59.4, 61, 250, 3599, 3600, 7199, 86399, 86400, 200000, 1e6} {
		shown := uiQueue(s, 1)
		back, tol, err := uiParseQueue(shown)
		if err != nil || math.Abs(back-s) > tol {
			t.Errorf("%vs shows as %q, read back as %v±%v (%v)", s, shown, back, tol, err)
		}
	}
}

// TestUIChart: a chart's points lie within its box, its GPU axis starts
// at 0 and covers the peak, a long line is merged to its peaks, and a
// window with nothing in it says so.
func TestUIChart(t *testing.T) {
	var pts []uiPoint
	for i := range 2000 {
		pts = append(pts, uiPoint{T: t0.Add(time.Duration(i) * 5 * time.Minute), V: float64(i % 97)})
	}
	end := pts[len(pts)-1].T
	c := uiChartSpec{Title: "t", From: t0, To: end, Now: end,
		Series: []uiSeries{{Class: "demand", Points: pts}, {Class: "paid", Points: pts[:10], Step: true, Until: t0.Add(time.Hour)}},
		Bands:  []uiBand{{Class: "band", Lo: pts[:5], Hi: pts[5:10]}}}.layout()
	if c.Empty || len(c.Lines) != 2 || len(c.Bands) != 1 || c.NowX == "" {
		t.Fatalf("%+v", c)
	}
	if n := strings.Count(c.Lines[0].Points, ","); n > uiMaxPoints {
		t.Errorf("%d points drawn, want at most %d", n, uiMaxPoints)
	}
	for _, p := range append(c.Lines, c.Bands...) {
		for _, xy := range strings.Fields(p.Points) {
			var x, y float64
			if _, err := fmt.Sscanf(xy, "%g,%g", &x, &y); err != nil || x < uiMarginL-0.1 || x > uiChartW-uiMarginR+0.1 || y < uiMarginT-0.1 || y > uiChartH-uiMarginB+0.1 {
				t.Fatalf("%s: point %q outside the plot", p.Class, xy)
			}
		}
	}
	if c.YTicks[0].Label != "0" || len(c.YTicks) < 3 || len(c.XTicks) == 0 || len(c.XTicks) > 9 {
		t.Errorf("ticks %+v %+v", c.YTicks, c.XTicks)
	}
	if top := c.YTicks[len(c.YTicks)-1].Label; top != "100" {
		t.Errorf("top tick %s, want 100 (the peak, 96, with room)", top)
	}
	if e := (uiChartSpec{From: t0, To: t0.Add(time.Hour), Series: []uiSeries{{Points: pts[:1]}}}).layout(); e.Empty || len(e.Lines) != 1 {
		t.Errorf("one point: %+v", e)
	}
	if e := (uiChartSpec{From: end.Add(time.Hour), To: end.Add(2 * time.Hour), Series: []uiSeries{{Points: pts}}}).layout(); !e.Empty {
		t.Errorf("a window with nothing in it: %+v", e)
	}
}
