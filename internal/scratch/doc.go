// Package scratch makes temporary directories that are removed even when
// the process that made them is killed: the sandbox's staging
// directories, the agent environments' episode workspaces and the
// engine's task work directories.
//
// A process that is killed with SIGKILL runs no deferred RemoveAll, so
// its directories stay in the temporary folder forever. Each directory
// made by Mkdir therefore carries its owner's lock: the directory is
// open in the owner and locked with flock(2). The kernel drops the lock
// when the owner exits, however it exits, so the next Sweep of the same
// folder — by any process, in any PID namespace sharing the folder —
// can tell the directories of dead owners (lock free: removed) from
// those of live ones (lock held: kept). Names also carry the owner's pid,
// for a person reading the folder: "rlpipe-task-p4242-3k9f1s".
//
//	dir, err := scratch.Mkdir("", "rlpipe-task-") // "" means os.TempDir()
//	if err != nil { … }
//	defer dir.Remove()
//	… work in dir.Path() …
//
// and once at start:
//
//	scratch.Sweep("", "rlpipe-task-") // the leftovers of killed runs
//
// Sweep unmounts what is mounted below a dead owner's directory (an
// episode's tmpfs and overlay) before removing it, when it may.
//
// Mkdir makes and locks each directory under a hidden name (a leading
// dot) and only then renames it into place, so a Sweep in another process
// never sees one of a live owner unlocked. A process killed in that
// instant leaves its hidden directory behind, empty and unlocked: Sweep
// removes those once they are a minute old (younger, one may be a live
// owner's about to be locked; an owner stalled longer than that in
// between finds its directory taken and makes another).
//
// The lock is the authority, not the pid: pids are reused and mean
// another process in another PID namespace. A lock needs a file system
// with flock (tmpfs, ext4, XFS, btrfs; not every network file system).
package scratch
