// Package openenv plays episodes on OpenEnv environments
// (https://github.com/meta-pytorch/OpenEnv, the `openenv` package): FastAPI
// apps that openenv.core's create_app makes, served by uvicorn. It is the
// episodes stage's rl_env openenv.
//
// # One episode, one session
//
// OpenEnv's HTTP /reset and /step build a fresh environment per request
// (a step never sees its reset), so an episode runs over the WebSocket
// /ws, one socket per episode in flight, JSON frames both ways:
//
//	>> {"type": "reset", "data": {"seed": 1234, "episode_id": "arith-7"}}
//	<< {"type": "observation", "data": {"observation": {...}, "reward": 0.0, "done": false}}
//	>> {"type": "step", "data": {"answer": "95"}}
//	<< {"type": "observation", "data": {"observation": {...}, "reward": 1.0, "done": true, "metadata": {...}}}
//	<< {"type": "error", "data": {"message": "...", "code": "VALIDATION_ERROR", "errors": [...]}}
//
// Reset sends the episode id and a seed from it (the top 31 bits of
// environments.Seed(id), which any seeding function takes), so the same
// id replays the same episode on an environment that seeds from it. A
// socket outlives its episode: End hands it to the next episode, whose
// reset starts a new one on it (a new socket costs ten times an episode);
// a reused socket the server has closed meanwhile is replaced
// transparently.
//
// # Actions and observations
//
// GET /schema gives the action's JSON Schema, read once per server (at
// Open for a url: server, at the first Reset for a served one) and
// compiled (santhosh-tekuri/jsonschema). A reply becomes an action by
// ActionOptions: its text in a string field (Field, by default the
// action's one required string field), or, with JSON, the reply itself
// when it is a JSON object (bare or in a ```json fence). The action is
// validated before it is sent; an invalid one, or a VALIDATION_ERROR
// from the server, is the policy's mistake: the observation says what is
// wrong (and gives the schema), the episode goes on, and the step's info
// records it (openenv_invalid_action).
//
// The policy reads the observation's Field (ObservationOptions), by
// default its one field besides metadata when that is a string, else the
// observation as JSON without metadata. The reward may be null (counted
// 0, recorded as info openenv_reward_null), a bool (1 or 0), or a
// number; the reply's and the observation's metadata become the step's
// info.
//
// # Where the server is
//
// Options.URL names a running server (any address; TokenEnv names the
// variable whose value a request carries in Header, Authorization: Bearer
// by default; the value is never written anywhere). Options.Serve has
// rlpipe run it: `PYTHON -m uvicorn APP --host 127.0.0.1 --port PORT` in
// its own process group, PORT a free loopback port, started when the first
// episode needs it and healthy when GET /health answers (within 120 s by
// default: openenv.core imports gradio). The start is the server's, not
// the first episode's: it goes on when that episode's ctx ends (a stage
// timeout shorter than the start), and each episode waits for it with
// its own ctx. A start whose port another process took first (uvicorn
// exits "address already in use", or another server answers /health:
// the port must be held by the started process, read from /proc) starts
// again on a new port, up to 3 times. A server that dies is started
// again for the next episode; one that does not start (its app does not
// import, /health is silent) fails every episode with its stderr's tail,
// without retrying. The server stops when no episode has used it for
// IdleStopS (300 s by default, so the iterations of a loop share one
// start), when its Remote is closed, and with rlpipe (a parent-death
// signal). Stages with the same serve options share one server in the
// process, and stages on the same server (url or serve, with the same
// token) share its idle sockets, so a stage's idle socket does not hold
// a session (of the server's max_concurrent_envs) another stage needs.
//
// Each request (a reset, a step, GET /schema) waits for its reply at most
// RequestTimeoutS (300 s by default): a server that hangs fails the
// episode with ErrTimeout.
//
// # The cache key
//
// With serve:, the digest of the app's code enters the stage's version:
// the .py files of the top-level package of the app's module (or its
// module file), found under cwd then pythonpath, so editing the
// environment replays its episodes; an app installed in the venv (found
// in neither) is not hashed. A url: server's code is outside rlpipe's
// view, but not its interface: Open reads its GET /schema (a server that
// is down or is not OpenEnv, or a token_env that is not set, fails Open,
// naming the URL or the variable) and the
// digest of that document, compacted, enters the version
// ("schema=sha256:…"), so a server whose action or observation changed
// replays its episodes; its episodes validate against the schema read
// then. A change that keeps the schemas (the reward logic alone) is
// still invisible: restart the run on a new branch, or change an
// option, after one. request_timeout_s enters the version when set.
//
// # Errors
//
// Failures are *Error values whose Kind is one of the Err variables. The
// machinery's (ErrUnreachable, ErrConnection, ErrProtocol, ErrCapacity,
// ErrStart) are environments.ErrInfra, so the runner records the episode
// as infra_error; the environment's (ErrEnvironment for EXECUTION_ERROR
// and other error codes, ErrNonFinite for a NaN or infinite reward) are
// env_error. Either way the episode is not trained on, and the next one
// goes on (reconnecting, or on a restarted server).
//
// A served server (rlpipe started it) that dies while an episode's step
// is outstanding is that episode's ErrEnvironment (env_error): the
// environment crashed on its action, and retrying it as infra would
// crash it again. Every step outstanding at the death is blamed (the
// server cannot say which one killed it); the episodes in flight that
// were not in a step (a reset, or waiting for the policy) are
// ErrConnection (infra_error). A url: server's death is always
// ErrConnection: rlpipe does not see its process.
//
// docs/ROLLOUTS.md ("Bring your environment", OpenEnv) has the minimal
// YAML; examples/openenv ships an environment on the real package.
package openenv
