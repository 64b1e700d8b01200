package judge

import "errors"

// Errors of the judge, tested with errors.Is. Errors that retrying cannot
// fix also match pipeline.ErrPermanent, so a task fails at once.
var (
	// ErrConfig: the judge config is invalid (New).
	ErrConfig = errors.New("invalid judge config")
	// ErrInput: an input does not fit the rubric (a missing metadata key).
	// Permanent.
	ErrInput = errors.New("input does not fit the rubric")
	// ErrRejected: the API answered 4xx to a well-formed request (a prompt
	// longer than the model's context). Permanent, and recorded by the
	// memo: the same input is rejected again. A replayed record keeps its
	// message and pipeline.ErrPermanent, not this error's identity.
	ErrRejected = errors.New("judge API rejected the request")
	// ErrSetup: the API refused the judge rather than the input: a wrong
	// key (401, 403), an unknown model or path (404), an exhausted quota
	// (429 insufficient_quota), a 2xx page that is not JSON at all (base_url
	// names some other server). Permanent but never recorded, so a run
	// resumed after the fix calls the API again.
	ErrSetup = errors.New("judge API refused the judge setup")
	// ErrUnavailable: the API still failed after the retries (408, 429,
	// 5xx, timeouts, connection errors, JSON the judge cannot use). Not permanent and
	// not recorded: the task's next attempt calls again.
	ErrUnavailable = errors.New("judge API unavailable")
)
