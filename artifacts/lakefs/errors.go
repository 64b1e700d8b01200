package lakefs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
)

// kinds says which named error a status means for one call: the same 404
// is a missing branch for GetBranch and a missing object for StatObject.
type kinds struct {
	notFound     error // 404 whose message names nothing more specific
	conflict     error // 409
	precondition error // 412
	// refLookup marks a call whose 404 means "this ref names nothing"
	// whatever the message says: GET /commits/{ref} answers "commit not
	// found" for a missing branch or tag too.
	refLookup bool
	// clash marks a call that creates a ref whose name another kind of
	// ref may hold; its 409 then says so in lakeFS's words.
	clash *nameClash
}

// nameClash is a ref being created under a name that a ref of another
// kind holds. lakeFS refuses it with 409 in words of its own: "branch
// name X: conflict found" for a tag named like a branch, "tag ID X:
// conflict found" for a branch named like a tag (lakeFS 1.0 to 1.84).
type nameClash struct {
	holder string // "branch" or "tag": the kind that holds the name
	name   string
}

// lead is how lakeFS's message starts, lower-cased.
func (n *nameClash) lead() string {
	if n.holder == "tag" {
		return "tag id "
	}
	return "branch name "
}

// in reports whether a lower-cased 409 message is this clash.
func (n *nameClash) in(msg string) bool {
	return strings.HasPrefix(msg, n.lead()) && strings.Contains(msg, "conflict found")
}

// kind is the named error: the exists error of the kind holding the name.
func (n *nameClash) kind() error {
	if n.holder == "tag" {
		return artifacts.ErrTagExists
	}
	return artifacts.ErrBranchExists
}

// translate turns an error from the client into a named artifacts error
// that says what was being done (what) and carries the server's message:
//
//	lakefs: create branch "x" from "main": branch exists: <server message>
//
// The client's credentials never appear in the result, even if the server
// or the transport echoed them.
func (c *Client) translate(err error, k kinds, what string) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("lakefs: %s: %w", c.redact(what), err)
		}
		return c.redactErr(fmt.Errorf("lakefs: %s: %w", what, err))
	}
	kind := classify(ae, k)
	msg := ae.Message
	if msg == "" {
		msg = fmt.Sprintf("%d %s", ae.Status, http.StatusText(ae.Status))
	}
	what, msg = c.redact(what), c.redact(msg)
	if kind == nil {
		return fmt.Errorf("lakefs: %s: server answered %d: %s", what, ae.Status, msg)
	}
	if k.clash != nil && kind == k.clash.kind() && k.clash.in(strings.ToLower(ae.Message)) {
		// lakeFS's words name the thing in the way but not the rule.
		return fmt.Errorf("lakefs: %s: %w: a %s named %q exists; refs name one or the other (server: %s)", what, kind, k.clash.holder, c.redact(k.clash.name), msg)
	}
	if kind == artifacts.ErrUnauthorized {
		return fmt.Errorf("lakefs: %s: %w: %s (check %s and %s)", what, kind, msg, EnvAccessKeyID, EnvSecretAccessKey)
	}
	return fmt.Errorf("lakefs: %s: %w: %s", what, kind, msg)
}

// classify picks the named error for a server answer, or nil if none fits.
func classify(ae *apiError, k kinds) error {
	msg := strings.ToLower(ae.Message)
	switch ae.Status {
	case http.StatusUnauthorized:
		return artifacts.ErrUnauthorized
	case http.StatusForbidden:
		// lakeFS answers 403 both for a refused policy and for a write
		// its rules forbid: a protected branch, the default branch.
		if strings.Contains(msg, "protected branch") || strings.Contains(msg, "default branch") {
			return artifacts.ErrProtected
		}
		return artifacts.ErrUnauthorized
	case http.StatusNotFound:
		// lakeFS names the missing thing in most messages ("repository
		// not found", "branch 'x' not found", "commit not found"); trust
		// it over the call's default.
		switch {
		case names(msg, "repository"):
			return artifacts.ErrRepositoryNotFound
		case strings.Contains(msg, "ambiguous"):
			return artifacts.ErrAmbiguousRef
		case k.refLookup && k.notFound != nil:
			return k.notFound
		case names(msg, "branch"):
			return artifacts.ErrBranchNotFound
		case names(msg, "tag"):
			return artifacts.ErrTagNotFound
		case names(msg, "commit"):
			return artifacts.ErrCommitNotFound
		}
		return orDefault(k.notFound, artifacts.ErrNotFound)
	case http.StatusGone:
		// An expired object: its data is gone although its entry remains.
		return orDefault(k.notFound, artifacts.ErrNotFound)
	case http.StatusConflict:
		// Before the dirty check: a tag named "dirty" clashing with a
		// branch is still a clash.
		if k.clash != nil && k.clash.in(msg) {
			return k.clash.kind()
		}
		if isDirty(msg) {
			return artifacts.ErrDirtyBranch
		}
		return orDefault(k.conflict, artifacts.ErrConflict)
	case http.StatusPreconditionFailed:
		return orDefault(k.precondition, artifacts.ErrConflict)
	case http.StatusLocked, http.StatusTooManyRequests:
		// A branch update that lost to other writers too often: lakeFS
		// answered 423 before, 429 ("too many attempts") since.
		return artifacts.ErrConcurrentUpdate
	case http.StatusBadRequest:
		switch {
		case strings.Contains(msg, "no changes"):
			return artifacts.ErrNoChanges
		case isDirty(msg):
			return artifacts.ErrDirtyBranch
		case strings.Contains(msg, "ref"):
			return artifacts.ErrInvalidRef
		}
		return artifacts.ErrInvalid
	case http.StatusRequestedRangeNotSatisfiable:
		return artifacts.ErrInvalid
	case http.StatusInternalServerError:
		// Errors lakeFS lets through unmapped as 500s: a branch held by
		// another writer ("branch is currently locked"), a branch update
		// that lost a compare-and-swap ("predicate failed"), a denied
		// permission, and a ref that does not resolve where the handler
		// maps only "not found" (GET /commits/{ref} with main^3).
		switch {
		case strings.Contains(msg, "locked"), strings.Contains(msg, "predicate failed"):
			return artifacts.ErrConcurrentUpdate
		case strings.Contains(msg, "required permissions"):
			return artifacts.ErrUnauthorized
		case strings.Contains(msg, "invalid value") && strings.Contains(msg, "ref"):
			return artifacts.ErrInvalidRef
		}
	}
	return nil
}

// names reports whether a lower-cased 404 message says that a thing of
// this kind is missing: "branch not found", "branch 'x' not found".
func names(msg, thing string) bool {
	if strings.Contains(msg, thing+" not found") {
		return true
	}
	return strings.HasPrefix(msg, thing+" '") && strings.HasSuffix(msg, "' not found")
}

func isDirty(msg string) bool {
	return strings.Contains(msg, "uncommitted") || strings.Contains(msg, "dirty")
}

// redactedError hides a secret in a message and keeps the chain for errors.Is.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact removes the client's credentials from s. They are never put into
// messages on purpose; this guards against a server or a transport error
// echoing them.
func (c *Client) redact(s string) string {
	if c.key == "" && c.secret == "" {
		return s
	}
	basic := base64.StdEncoding.EncodeToString([]byte(c.key + ":" + c.secret))
	for _, cred := range []string{basic, c.secret, c.key} {
		if len(cred) >= 4 { // shorter strings would mangle ordinary words
			s = strings.ReplaceAll(s, cred, "<redacted>")
		}
	}
	return s
}

// redactErr is redact for an error whose chain must survive for errors.Is.
func (c *Client) redactErr(err error) error {
	if msg := c.redact(err.Error()); msg != err.Error() {
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// orDefault is kind, the error a call site named, or def when it named none.
func orDefault(kind, def error) error {
	if kind != nil {
		return kind
	}
	return def
}
