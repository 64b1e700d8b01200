package openenv

import (
	"errors"

	"github.com/rlpipe/rlpipe/environments"
)

// The package's errors. Each failure is an *Error whose Kind is one of
// these; every kind but ErrEnvironment and ErrNonFinite is also
// environments.ErrInfra (the runner records the episode as infra_error:
// the machinery failed, not the episode).
var (
	// ErrUnreachable: no WebSocket to the server (connection refused, a
	// failed handshake, no /schema).
	ErrUnreachable = &sentinel{"openenv server unreachable", true}
	// ErrConnection: the socket closed or failed during an episode (the
	// server died).
	ErrConnection = &sentinel{"openenv connection lost", true}
	// ErrProtocol: a frame that is not OpenEnv's (not JSON, an unknown
	// type, a reply to the wrong request).
	ErrProtocol = &sentinel{"openenv protocol violation", true}
	// ErrTimeout: a request without a reply within request_timeout_s
	// (the server hangs).
	ErrTimeout = &sentinel{"openenv request timed out", true}
	// ErrCapacity: the server answered CAPACITY_REACHED.
	ErrCapacity = &sentinel{"openenv server at capacity", true}
	// ErrStart: a serve: server that did not start (its app did not
	// import, or /health did not answer in time).
	ErrStart = &sentinel{"openenv server did not start", true}
	// ErrEnvironment: the environment failed on this episode
	// (EXECUTION_ERROR and other error frames, or a server rlpipe runs
	// that died during the episode's step): env_error.
	ErrEnvironment = errors.New("openenv environment error")
	// ErrNonFinite: a reward of NaN or ±Infinity: env_error.
	ErrNonFinite = errors.New("openenv non-finite reward")
)

// sentinel is a kind of error; infra kinds are environments.ErrInfra.
type sentinel struct {
	msg   string
	infra bool
}

func (e *sentinel) Error() string { return e.msg }

// Is reports an infra kind as environments.ErrInfra.
func (e *sentinel) Is(target error) bool { return e.infra && target == environments.ErrInfra }

// Error is a failure of the package: Msg says what was being done, with
// what, and what to do next; Kind is one of the Err values.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }
