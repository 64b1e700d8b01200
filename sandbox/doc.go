// Package sandbox runs model-written code, or the checker that grades it, in
// a bubblewrap (bwrap) sandbox, and turns what happened into a Result whose
// fields are inputs of reward expressions.
//
// # A run
//
// A Spec names a command, the files it needs and its limits:
//
//	r, err := sandbox.Run(ctx, sandbox.Spec{
//		Command:       []string{"python3", "/harness/run.py"},
//		Files:         map[string][]byte{"solution.py": solution}, // written by the model
//		ReadOnlyFiles: map[string][]byte{"/harness/run.py": harness}, // calls it, prints results
//		Limits:        sandbox.Limits{CPUTime: 5 * time.Second},
//	})
//	if err != nil {
//		return err // no verdict: never a reward of 0
//	}
//
// A checker must not judge code it runs beside: the code decides the exit
// code (os._exit(0)) and can rewrite what it can reach. Judge r.Stdout in
// a second Run, after the first has returned, with the checker and the
// answers in its ReadOnlyFiles and Verdict set: the checker writes pass or
// fail to $RLPIPE_VERDICT, and Result.Verdict holds it. rewards/runners
// does exactly this; docs/REWARDS.md has the threat model.
//
// Run returns an error only when there is no verdict: ErrInvalid for a bad
// Spec, ErrInfra when the sandbox could not start (ErrNoBwrap when bwrap is
// not installed), or the context's error. Everything the program does —
// exit 1, crash, loop forever, print forever, fork without end, allocate
// without end, fill the disk — is a Result with a Status, and
// Result.Vars names its fields for a reward expression (passed, exit_code,
// stdout, timed_out, status, …).
//
// # A long-lived process
//
// Start runs a Spec's command as a worker that answers requests, one
// line each, over its stdin and stdout: Process.Call sends a request and
// reads the answer, Process.Kill and Process.Wait end it. A Python
// interpreter imports its code once and scores batch after batch
// (rewards/python). Run, RunIn and Start set a sandbox up with the same
// code (box in sandbox.go), so a worker has every guarantee below; only
// the wall limit differs: it bounds each request, and a request without
// an answer in time kills the worker (StatusTimeout), which the caller
// restarts. The other limits bound the worker's whole life.
//
// # What the program sees
//
//   - A read-only root: /usr and the other DefaultBinds, plus
//     Spec.ReadOnlyBinds, and Spec.ReadOnlyMounts at paths of their own
//     (a venv under the host's /work seen at /python/venv). Writing
//     anywhere else fails with EROFS, except in Spec.Mounts: host
//     directories the caller hands over writable at paths of their own
//     (a Harbor task's /app, its verifier's /logs/verifier).
//   - /work, its working directory and HOME: a private tmpfs holding
//     Spec.Files, gone when Run returns. /tmp and /dev/shm are private
//     tmpfs too. Each is at most Limits.FileBytes.
//   - Its own PID, network, IPC, UTS and user namespaces: no network at
//     all (not even the host's loopback), no other process of the host.
//   - Only the variables in Spec.Env, plus PATH, HOME=/work, LANG=C.UTF-8
//     and PWD=/work.
//   - Its own uid: the caller's, or nobody (65534) when the caller is root.
//   - Spec.ReadOnlyFiles at their own paths outside /work (/harness/…,
//     /check/…): readable, never writable, removable or replaceable.
//   - Only stdin, stdout and stderr (and, with Spec.Verdict, the verdict
//     pipe): a descriptor this process inherited without close-on-exec
//     (from a CI runner or a supervisor) is marked close-on-exec before
//     each run, so it never reaches the program.
//   - A smaller kernel: a seccomp filter (seccomp.go) makes ptrace, mount,
//     unshare, setns, keyctl, bpf, perf_event_open, kexec, io_uring,
//     userfaultfd and the like fail with EPERM, and clone with a new
//     namespace too; bwrap's --disable-userns refuses nested user
//     namespaces by itself. Only x86_64 has a filter: elsewhere Run
//     refuses (ErrInfra) unless RLPIPE_SANDBOX_NO_SECCOMP=1.
//
// # Nothing left behind
//
// Every process of a run ends with it: a limit kills the sandbox's init,
// which ends its PID namespace. The init is reaped here when this process
// inherits it (PID 1 of a container, a subreaper), so no run leaves a
// zombie. Staging directories are removed when Run returns, and those of
// a killed process at the next process's first run (internal/scratch).
// A kill -9 of this process ends its sandboxes too, also during their
// setup, where it may make a PID namespace (root with CAP_SYS_ADMIN) or a
// user and a PID namespace together (an ordinary user, where user
// namespaces are allowed): bwrap is then the init of one of its own (see
// pidNamespace in sandbox.go). Elsewhere a sandbox can outlive a kill
// during its setup (Run warns once, saying why); where a cgroup is in
// force, bwrap starts in the run's group, so the next process kills it
// with the group (cgroup.go).
//
// # Limits
//
// Limits are a cgroup per run where this process may make one (cgroup.go:
// memory, processes and CPU time for the sandbox as a whole), rlimits set
// by util-linux's prlimit inside the sandbox just before it executes the
// command, a wall-clock timer and output caps kept by Run; see Limits for
// each, and Enforcement for which are in force here. Without a cgroup the
// first run logs a warning: the rlimits bind each process, not the
// sandbox. Two choices are worth knowing:
//
//   - RLIMIT_NPROC does not bind root, so when the caller is root Run starts
//     bwrap as nobody. Each sandbox gets its own user namespace, in which the
//     kernel counts that user's processes apart from every other sandbox's,
//     so a fork bomb stops at Limits.Procs while concurrent runs do not
//     share the budget. This needs unprivileged user namespaces, the default
//     on Debian and Ubuntu.
//   - Memory is bounded by RLIMIT_AS per process: allocations past it
//     fail, and the program dies of its runtime's out-of-memory error
//     (Python's MemoryError); Run reports StatusMemory when a failed
//     program's stderr carries such an error. The cgroup, where there is
//     one, bounds all processes together: the kernel kills one past it,
//     and Run reports StatusMemory from the group's OOM count.
//
// # Requirements
//
// bwrap (package bubblewrap, 0.8 or later for tmpfs sizes and
// --disable-userns) and prlimit (util-linux) on the host, and unprivileged
// user namespaces. Available says whether a sandbox starts here, and
// if not, why.
package sandbox
