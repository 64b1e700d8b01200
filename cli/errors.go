package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
)

// usageError is a mistake in how a command was called: an unknown flag or
// command, a wrong number of arguments, a malformed argument. It exits
// with ExitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// asUsage marks err (e.g. from parsing an argument) as a usage mistake.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err: err}
}

// exitError forces an exit code, for failures whose cause would otherwise
// be read as a usage mistake (a malformed input file is not a bad call).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// failure marks err as a failure (ExitFailure) whatever its cause.
func failure(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitFailure, err: err}
}

// explained replaces the message of an error with one that says what to
// do next, keeping the cause for errors.Is and the exit code.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// explain returns err with a new message; the cause is kept.
func explain(err error, format string, a ...any) error {
	return &explained{msg: fmt.Sprintf(format, a...), err: err}
}

// explainDirty explains that op stopped because branch has uncommitted
// changes, with the commands that commit or discard them, then more (a
// line of its own) when it is not empty.
func explainDirty(err error, op, branch, more string) error {
	msg := fmt.Sprintf("%s: %s has uncommitted changes\n"+
		"commit them first:  rlpipe commit %s -m MSG\n"+
		"or discard them:    rlpipe branch reset %s", op, branch, branch, branch)
	if more != "" {
		msg += "\n" + more
	}
	return &explained{msg: msg, err: err}
}

// errorMessage is the text a user sees for err: the message, and for the
// common store errors that were not explained at the call site, a hint on
// what to do next.
func errorMessage(err error) string {
	msg := err.Error()
	var ex *explained
	if errors.As(err, &ex) {
		return msg
	}
	if h := hintFor(err); h != "" && !strings.Contains(msg, h) {
		msg += "\n" + h
	}
	return msg
}

// storeHints pairs the store's named errors with the next step each
// suggests, the first that matches winning (a missing branch is also a
// missing ref, and says which command lists branches).
var storeHints = []struct {
	err  error
	hint string
}{
	{artifacts.ErrAmbiguousRef, "hint: the commit-id prefix matches several commits; use a longer prefix (`rlpipe log REF` shows full ids)"},
	{artifacts.ErrReadOnlyRef, "hint: writes go to a branch; make one with `rlpipe branch create NAME --from REF`"},
	{artifacts.ErrBranchNotFound, "hint: `rlpipe branch list` shows the branches"},
	{artifacts.ErrTagNotFound, "hint: `rlpipe tag list` shows the tags"},
	{artifacts.ErrRefNotFound, "hint: a ref is a branch, a tag or a commit id (`rlpipe branch list`, `rlpipe tag list`, `rlpipe log REF`)"},
	{artifacts.ErrObjectNotFound, "hint: `rlpipe ls REF:PREFIX` lists what a ref holds"},
	{artifacts.ErrConcurrentUpdate, "hint: another writer moved the branch first; run the command again"},
	{artifacts.ErrUnauthorized, "hint: check LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"},
}

// hintFor suggests a next step for an error from the store.
func hintFor(err error) string {
	for _, h := range storeHints {
		if errors.Is(err, h.err) {
			return h.hint
		}
	}
	if errors.Is(err, artifacts.ErrIntegrity) && !strings.Contains(err.Error(), "rlpipe fsck") {
		return "hint: the store is damaged; `rlpipe fsck` lists what is damaged and the refs that reach it"
	}
	return ""
}

// withOp prefixes err with the operation that failed ("log main: …"),
// unless the backend's message already names it.
func withOp(err error, format string, a ...any) error {
	op, msg := fmt.Sprintf(format, a...), err.Error()
	if strings.HasPrefix(msg, op) {
		return err
	}
	// "main:x: object not found" reads as "cat main:x: object not found".
	if verb, subject, ok := strings.Cut(op, " "); ok && strings.HasPrefix(msg, subject+":") {
		return fmt.Errorf("%s %w", verb, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
