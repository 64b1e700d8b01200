// Package ui serves a small web UI over a store: the runs with their
// iterations, task timings, train metrics and evaluations; each
// iteration's tasks and the artifacts its commit wrote; branches, history
// and files; and a browser for any Parquet table. `rlpipe ui` runs it.
//
// # Shape
//
// A Server is an http.Handler with two halves:
//
//   - a read-only JSON API under /api/ (every answer, errors included, is
//     JSON; an error is {"error": "what went wrong and what to do", "status": N});
//   - one page, assets/index.html with app.js and app.css, embedded with
//     go:embed. The page routes on the URL hash (#/runs/NAME/iterations/3),
//     fetches the API and draws its charts as inline SVG. There is no
//     build step and nothing is loaded from the network.
//
// Endpoints (all GET):
//
//	/api/runs                         runs: last iteration, head commit, lock and heartbeat
//	/api/runs/{run}                   state, iterations (task timings, train metrics), evals
//	/api/runs/{run}/iterations/{n}    tasks placed on a timeline, artifacts written, sizes
//	/api/branches                     branches with their head commits, and tags
//	/api/log?ref=&offset=&limit=      history from a ref, newest first, paged
//	/api/ls?ref=&prefix=              one level of a ref's tree
//	/api/object?ref=&path=            a small object as text (configs, metrics, events)
//	/api/table?ref=&path=&offset=&limit=   a page of any Parquet table
//	/api/episode?ref=&path=&row=      a trajectories row as an episode: turns, trainable tokens
//	/api/events?run=                  Server-Sent Events: "head" when the run's branch moves
//
// # Where the numbers come from
//
// The UI reads what the engine commits and nothing else, so it can watch a
// run that another process is writing (the embedded store is shared
// between processes). A run is the branch runs-NAME; its iteration commits
// carry the metadata rlpipe.run and rlpipe.iteration, and the walk along
// first parents stops where the run branched off, as `rlpipe status` does.
// For iteration N:
//
//	events/NNNNNN.metrics.json        per-task seconds, attempts, cached (runs.IterationMetrics)
//	events/NNNNNN.jsonl               task start and finish times: the timeline
//	iterations/NNNNNN/train_metrics.json   any JSON object; its numbers are charted,
//	                                  nested keys flattened with dots ("reward.mean")
//	evals/NNNNNN/SET/summary.parquet  pass@k and friends of checkpoint N
//
// What an iteration wrote is the two-dot diff of its commit against its
// parent. Commits are immutable, so what is read from one is cached by
// commit id: a page that refreshes on every new iteration reads each
// commit once.
//
// # Live updates
//
// /api/events polls the run's branch every Options.PollInterval (1s) and
// sends a "head" event when it moves, or when a driver takes or lets go
// of the run (HeadEvent.Live: the run's lock is held by a live process,
// which is what the header's "live" badge shows); the run view re-fetches
// /api/runs/{run} and redraws. Polling the store rather than hooking the
// engine means it works across processes and backends alike.
//
// # Safety
//
// The server listens on loopback by default and refuses any other address
// without Options.Token (New checks the literal address, Listen the
// resolved one and the bound socket). With a token, a browser presents it
// once as ?token= and receives an HttpOnly cookie; scripts send
// Authorization: Bearer TOKEN. Without a token, requests whose Host is not
// loopback are refused, which defeats DNS rebinding. The page runs under a
// Content-Security-Policy that allows only its own scripts and styles, and
// builds the DOM from text nodes, never from HTML strings. A panic in a
// handler becomes a 500 answer and a log line.
//
// Serve ends event streams as soon as its context ends and gives other
// requests Options.ShutdownTimeout to finish.
//
// # Tests
//
// The handler tests make a run with the real engine (the stand-in stages
// and a small evaluation) in a temporary embedded store. The browser test
// drives headless Chromium over the DevTools protocol on a pipe (no Node,
// no websocket): it opens hash URLs, waits for the DOM, checks the charts'
// data points, watches the run view redraw after a new commit, and takes a
// screenshot. TestBrowserKLNotComputed runs the real GRPO trainer at
// β = 0, whose metrics hold kl as null, and checks that the KL panel says
// it was not computed and draws nothing. TestBrowserLayout checks the run view's and a report's
// geometry at 1360 px: legends clear of titles, marks inside their plots
// (axes cover the data), equal series drawn once with a note, and wide
// tables scrolling in their box rather than widening the page; the
// evaluations table's column order, intervals and collapsed columns,
// alike y ticks, exact_pass@1's own colour and note, reward and accuracy
// merged when equal, and the page as wide as a 2400 px window. The
// browser tests keep their screenshots in $RLPIPE_UI_SCREENSHOTS (else
// the test's temporary directory) and log each path. It installs Chromium with scripts/browser-deps.sh when it is
// missing and skips only when that fails.
package ui
