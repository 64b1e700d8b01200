// Package sandbox runs model-written code, or the checker that grades it, in
// a bubblewrap (bwrap) sandbox, and turns what happened into a Result whose
// fields are inputs of reward expressions.
//
// # A run
//
// A Spec names a command, the files it needs and its limits:
//
//	r, err := sandbox.Run(ctx, sandbox.Spec{
//		Command: []string{"python3", "test.py"},
//		Files: map[string][]byte{
//			"solution.py": solution, // written by the model
//			"test.py":     checker,  // imports solution, exits non-zero on failure
//		},
//		Limits: sandbox.Limits{CPUTime: 5 * time.Second},
//	})
//	if err != nil {
//		return err // no verdict: never a reward of 0
//	}
//	reward := 0.0
//	if r.Passed() {
//		reward = 1
//	}
//
// Run returns an error only when there is no verdict: ErrInvalid for a bad
// Spec, ErrInfra when the sandbox could not start (ErrNoBwrap when bwrap is
// not installed), or the context's error. Everything the program does —
// exit 1, crash, loop forever, print forever, fork without end, allocate
// without end, fill the disk — is a Result with a Status, and
// Result.Vars names its fields for a reward expression (passed, exit_code,
// stdout, timed_out, status, …).
//
// # What the program sees
//
//   - A read-only root: /usr and the other DefaultBinds, plus
//     Spec.ReadOnlyBinds. Writing anywhere else fails with EROFS.
//   - /work, its working directory and HOME: a private tmpfs holding
//     Spec.Files, gone when Run returns. /tmp and /dev/shm are private
//     tmpfs too. Each is at most Limits.FileBytes.
//   - Its own PID, network, IPC, UTS and user namespaces: no network at
//     all (not even the host's loopback), no other process of the host.
//   - Only the variables in Spec.Env, plus PATH, HOME=/work, LANG=C.UTF-8
//     and PWD=/work.
//   - Its own uid: the caller's, or nobody (65534) when the caller is root.
//   - Only stdin, stdout and stderr: a descriptor this process inherited
//     without close-on-exec (from a CI runner or a supervisor) is marked
//     close-on-exec before each run, so it never reaches the program.
//
// # Limits
//
// Limits are rlimits set by util-linux's prlimit inside the sandbox, just
// before it executes the command, plus a wall-clock timer and output caps
// kept by Run; see Limits for each. Two choices are worth knowing:
//
//   - RLIMIT_NPROC does not bind root, so when the caller is root Run starts
//     bwrap as nobody. Each sandbox gets its own user namespace, in which the
//     kernel counts that user's processes apart from every other sandbox's,
//     so a fork bomb stops at Limits.Procs while concurrent runs do not
//     share the budget. This needs unprivileged user namespaces, the default
//     on Debian and Ubuntu.
//   - Memory is bounded by RLIMIT_AS: allocations past it fail, and the
//     program dies of its runtime's out-of-memory error (Python's
//     MemoryError). Run reports StatusMemory when a failed program's
//     stderr carries such an error; no cgroup is needed, at the cost of
//     counting address space rather than resident memory.
//
// # Requirements
//
// bwrap (package bubblewrap, 0.8 or later for tmpfs sizes) and prlimit
// (util-linux) on the host. Available says whether a sandbox starts here, and
// if not, why.
package sandbox
