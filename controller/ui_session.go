package controller

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fleetcast/autoscaler/apiauth"
)

// The web page's sessions. A login trades an API token that may read for
// a cookie that holds no token: a session signed with HMAC-SHA256 under
// a key this process draws at random when it builds its API (so a restart
// logs everyone out), naming the token it was made from and when it
// expires. The server keeps nothing per session but the sessions logged
// out before their expiry (at most uiMaxLoggedOut).
//
// At every request the session's token is looked up among the
// controller's API tokens (apiauth.Tokens.List, a handful of records): a
// token revoked since, rotated since, or revoked and made again under its
// name ends the session there. A login made while a rotation's grace
// holds (the old secret or the new, which cannot be told apart without
// the secret) ends with that grace. Only GET /ui takes the cookie (its
// path is /ui, and the JSON API reads bearer tokens alone).

// uiCookie is the session cookie's name.
const uiCookie = "fleetcast_ui"

// uiSessionLife is how long a login lasts.
const uiSessionLife = 12 * time.Hour

// uiMaxLoggedOut bounds the sessions remembered as logged out before
// their expiry; beyond it the one expiring soonest is forgotten.
const uiMaxLoggedOut = 10000

// uiSession is what a session cookie says, signed.
type uiSession struct {
	// ID tells the session apart, to log it out.
	ID string `json:"id"`
	// Token names the API token the session was made from, Created is
	// when that token was made (Unix nanoseconds; 0 for the root token)
	// and Rotations how often it had been rotated: a token revoked and
	// made again, or rotated, is another.
	Token     string `json:"tok"`
	Created   int64  `json:"cre"`
	Rotations int    `json:"rot"`
	// Grace is set on a session made while the token's rotation grace
	// held: it ends with the grace.
	Grace bool `json:"grace,omitempty"`
	// Expires is when the session ends (Unix seconds).
	Expires int64 `json:"exp"`
}

// uiSessions issues and checks sessions.
type uiSessions struct {
	key    []byte
	tokens *apiauth.Tokens
	now    func() time.Time

	mu        sync.Mutex
	loggedOut map[string]time.Time // session ID -> its expiry
}

func newUISessions(tokens *apiauth.Tokens, now func() time.Time) *uiSessions {
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	return &uiSessions{key: key, tokens: tokens, now: now, loggedOut: map[string]time.Time{}}
}

// listed is the record of the token named name, as the tokens list it.
func (s *uiSessions) listed(name string) (apiauth.Listed, bool) {
	if s.tokens == nil {
		return apiauth.Listed{}, false
	}
	for _, l := range s.tokens.List() {
		if l.Name == name {
			return l, true
		}
	}
	return apiauth.Listed{}, false
}

// issue makes a session for tok (a token that may read, just checked),
// as a cookie's value, and when it expires; ok is false when the token
// is gone already.
func (s *uiSessions) issue(tok apiauth.Token) (value string, expires time.Time, ok bool) {
	l, ok := s.listed(tok.Name)
	if !ok || !l.Scope.Allows(apiauth.Read) {
		return "", time.Time{}, false
	}
	id := make([]byte, 16)
	rand.Read(id)
	expires = s.now().Add(uiSessionLife).Truncate(time.Second)
	sess := uiSession{ID: base64.RawURLEncoding.EncodeToString(id), Token: l.Name, Rotations: l.Rotations,
		Grace: !l.PreviousUntil.IsZero(), Expires: expires.Unix()}
	if !l.Created.IsZero() {
		sess.Created = l.Created.UnixNano()
	}
	payload, err := json.Marshal(sess)
	if err != nil {
		return "", time.Time{}, false
	}
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.sign(p)), expires, true
}

// sign is the MAC of a session's encoded payload.
func (s *uiSessions) sign(payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("fleetcast-ui-session-v1\x00" + payload))
	return m.Sum(nil)
}

// check returns the session value holds, if it is good now: signed with
// this process's key, not expired, not logged out, and its token the one
// the controller holds under its name, still allowed to read.
func (s *uiSessions) check(value string) (uiSession, bool) {
	p, mac, ok := strings.Cut(value, ".")
	if !ok {
		return uiSession{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, s.sign(p)) {
		return uiSession{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return uiSession{}, false
	}
	var sess uiSession
	if err := json.Unmarshal(payload, &sess); err != nil || sess.ID == "" {
		return uiSession{}, false
	}
	if !s.now().Before(time.Unix(sess.Expires, 0)) {
		return uiSession{}, false
	}
	s.mu.Lock()
	_, out := s.loggedOut[sess.ID]
	s.mu.Unlock()
	if out {
		return uiSession{}, false
	}
	l, ok := s.listed(sess.Token)
	created := int64(0)
	if !l.Created.IsZero() {
		created = l.Created.UnixNano()
	}
	if !ok || !l.Scope.Allows(apiauth.Read) || created != sess.Created || l.Rotations != sess.Rotations || sess.Grace && l.PreviousUntil.IsZero() {
		return uiSession{}, false
	}
	return sess, true
}

// fromRequest is the good session r's cookie holds, if any.
func (s *uiSessions) fromRequest(r *http.Request) (uiSession, bool) {
	ck, err := r.Cookie(uiCookie)
	if err != nil {
		return uiSession{}, false
	}
	return s.check(ck.Value)
}

// logOut ends sess before its expiry.
func (s *uiSessions) logOut(sess uiSession) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	soonest, at := "", time.Time{}
	for id, exp := range s.loggedOut {
		if !now.Before(exp) {
			delete(s.loggedOut, id)
		} else if soonest == "" || exp.Before(at) {
			soonest, at = id, exp
		}
	}
	if len(s.loggedOut) >= uiMaxLoggedOut {
		delete(s.loggedOut, soonest)
	}
	s.loggedOut[sess.ID] = time.Unix(sess.Expires, 0)
}

// uiSessionCookie is the session cookie holding value until expires; r
// says whether it came over TLS (then the cookie is sent over TLS alone).
func uiSessionCookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{Name: uiCookie, Value: value, Path: "/ui", Expires: expires.UTC(), MaxAge: int(uiSessionLife / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// uiClearCookie is the cookie that deletes the session's.
func uiClearCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{Name: uiCookie, Value: "", Path: "/ui", Expires: time.Unix(0, 0).UTC(), MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}
