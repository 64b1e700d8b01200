// Package supervisor runs rlpipe's worker processes on one host so that
// they follow the work: for each environment of a pipeline it keeps
// between a minimum and a maximum of `rlpipe worker --env ENV` processes,
// starting one when tasks wait on the environment's Temporal task queue
// and stopping one that has run no attempt for an idle timeout. This is
// `rlpipe worker --scale ENV=MIN:MAX` (docs/DEPLOY.md, "Workers that
// follow the work"); on Kubernetes an autoscaler such as KEDA's Temporal
// scaler does the same job with pods.
//
// Two parts:
//
//   - Decide is the policy, a pure function: from the queue's backlog,
//     the attempts each process runs and how long each has been idle, it
//     returns how many processes to start and which to stop. The number
//     wanted is ceil((backlog + attempts running) / capacity), capacity
//     being how many attempts one process runs at once, clamped to
//     [min, max]. Only a process that has run no attempt for the idle
//     timeout is stopped, longest idle first, so a trainer process exits
//     between updates, never during one.
//
//   - Run is the mechanism: it polls the backlog (QueueBacklog reads
//     Temporal's task-queue description with its statistics), starts
//     processes with the command Options.Command builds, follows each
//     process's attempts from the JSON log lines it writes on stderr
//     ("attempt started", then "attempt finished" or "attempt failed"),
//     and stops a process with SIGTERM. A stopped rlpipe worker stops
//     polling and exits; an attempt it took in the moment between the
//     decision and the signal is handed over (it runs again on another
//     worker without counting as a failure). A process that dies
//     (SIGKILL, a crash) is replaced at the next poll if the backlog
//     still wants it; its attempt runs again elsewhere once its heartbeat
//     times out.
//
// The backlog Temporal reports is approximate and, on server 1.29, cached
// for up to 5 s (matching.TaskQueueInfoByBuildIdTTL): a process starts
// within a poll interval plus those seconds of work arriving.
package supervisor
