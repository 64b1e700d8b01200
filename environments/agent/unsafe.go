package agent

// UnsafePaths checks a final workspace (root, a copy of world) the way the
// agent Env does before its verifier runs (Task, step 3), for
// environments that judge workspaces of their own: it lists, in path
// order, each symlink the episode made that leads out of root, and each
// FIFO, socket or device it made, with what it is ("out/link is a symlink
// to /etc, out of the workspace"). A verifier must not open a workspace
// that has any.
//
// With strict, a link that resolves to nothing beneath root is listed
// too: a verifier that sees the workspace's directories at paths of their
// own (a Harbor task's /app) and other directories beside them (/tests)
// would follow "../tests/…" out of the workspace, where on the host it
// dangles.
func UnsafePaths(root, world string, strict bool) ([]string, error) {
	return checkPaths(root, world, strict)
}

// UnsafeReason says why a verifier did not run, naming the paths
// UnsafePaths found (at most ten).
func UnsafeReason(found []string) string { return unsafeReason(found) }

// GiveToSandbox gives every entry of dir to the sandbox's user
// (sandbox.SandboxUID), as a Cache does with a world it built: for a
// directory a sandboxed program is to change, such as a world being built
// by programs run in the sandbox.
func GiveToSandbox(dir string) error { return chownTree(dir) }
