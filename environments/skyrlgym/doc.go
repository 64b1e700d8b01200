// Package skyrlgym plays SkyRL-gym's text environments (the skyrl-gym
// Python package: gsm8k, gsm8k_multi_turn, text2sql, search, searchcode,
// aime, lcb, or a class of your own) as the RL environment skyrl_gym of
// an episodes stage:
//
//	generate:
//	  kind: episodes
//	  rl_env: skyrl_gym
//	  rl_options: {env_class: gsm8k_multi_turn, python: .venv-py}
//
// # The worker
//
// The environments live in one supervised Python process per setup (the
// python, the sandbox choice, the class files' directories, db_path and
// the limits), shared by every stage and episode of the program with that
// setup: a worker script embedded here (worker.py), run with -I, that
// holds env objects by handle and answers one JSON line per request on
// stdin with one JSON line on stdout, each reply repeating its request's
// id. The script points fd 1 and sys.stdout at stderr before importing
// anything, keeping a duplicate of the original fd 1 for the protocol, so
// what an environment prints (print, or C code writing to fd 1) never
// reaches the protocol stream.
//
// Run directly (sandbox false), many episodes' requests are in flight at
// once on the pipe (a reader matches replies to requests by id), so the
// Python side never waits on a round trip. In rlpipe's sandbox
// (sandbox.Start, as rewards/python runs its worker: no network, a
// read-only root, the interpreter bound read-only, a class file's
// directory and env_config.db_path mounted read-only) the requests take
// turns. The sandbox is on by default for the classes that run the
// model's code (lcb, searchcode).
//
// An episode is a make request (at the Maker, so a row the env refuses —
// a KeyError for an extra it needs — fails the stage before any episode,
// naming the row), an init (Reset) and a step per turn; the worker closes
// an env whose step says done, and End closes one that is not. End never
// waits behind another episode's request: its close is sent at once when
// the worker is idle (in the sandbox, End then waits for that close's
// own answer, never another episode's), else it is sent just ahead of
// the worker's next request (in the sandbox, in that request's turn),
// its reply discarded.
// A close that crashes or hangs the worker is the culprit as any request
// would be (the requests behind it are infra_error), blaming no episode.
// An env made in a process that has since ended is made again at Reset.
//
// # Rows, observations, rewards
//
// The env's extras are the prompt row's metadata object (a SkyRL
// dataset's extra columns: reward_spec, extra_info, max_turns, db_id,
// data), plus reward_spec {method: rule, ground_truth: answer} when the
// metadata has none and the row has an answer (Extras). init gets the
// row's messages, or its prompt as one user message (Prompt). SkyRL's
// observations are a list of messages; the observation is their
// contents, in order, joined by a blank line (Observation): the runner
// shows it in its observation role. Each step's reward is the step's
// reward (a Python int 0 becomes 0.0; NaN or ±inf ends the episode with
// env_error), done ends the episode, and the step's metadata becomes
// Step.Info.
//
// # Faults
//
//   - An env that raises in init or step: that episode is env_error
//     (*EnvError, ErrRaised) with the exception's last line; in make, the
//     stage fails naming the prompt row (ErrRow) and the next step.
//   - A worker that ends (a crash) or writes a line that is not a reply
//     while serving a request: the request it was serving — the oldest
//     written and unanswered, as the worker serves them one at a time in
//     the order written — is the culprit, its episode env_error
//     (ErrCrashed); the other episodes in flight, or whose envs were in
//     that process, are infra_error (ErrLost); the next request starts a
//     new process. A make that crashes the worker is the row's fault
//     (ErrRow, not tried again); one that meets a process another
//     request ended is tried once more.
//   - A request with no answer: request_timeout_s, counted from when the
//     worker starts serving it (not while it waits its turn), kills the
//     worker, the episode env_error; the episode's wall-clock budget (the
//     stage's timeout) ends it as timeout. An episode whose context ends
//     (its budget, or the stage cancelled) kills the worker only when its
//     request is the one being served, and is then the culprit; a request
//     still queued is dropped (its reply discarded) and one not yet sent
//     is never sent.
//   - The worker runs in its own process group, killed when rlpipe dies;
//     on a crash the group is killed before the exit status is collected,
//     so a child the env forked cannot delay the restart. Its
//     subprocesses inherit /dev/null as stdin, never the requests.
//   - An env whose Reset failed is still closed by End, in the process
//     that may hold it.
//   - env_class that names nothing (ErrUnknownClass), a worker that does
//     not start (ErrStart), other bad rl_options (ErrOptions): Open fails
//     with the next step.
//
// docs/ROLLOUTS.md ("Bring your environment", "SkyRL-gym") has the
// minimal YAML and what runs where.
package skyrlgym
