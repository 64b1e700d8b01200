package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts"
)

// TestErrors checks that each mistake a user makes exits with the right
// code and says what to do next.
func TestErrors(t *testing.T) {
	// committed sets up main with one committed file and a branch "b".
	committed := func(h *harness) {
		h.stdin = "v1\n"
		h.ok("put", "-", "main:data/x.txt")
		h.ok("commit", "main", "-m", "x")
		h.ok("branch", "create", "b", "--from", "main")
		h.ok("tag", "create", "v1", "main")
	}
	tests := []struct {
		name  string
		setup func(h *harness)
		args  []string
		code  int
		want  []string
	}{
		{
			name: "missing store",
			args: []string{"log", "main"},
			code: ExitFailure,
			want: []string{"no store at ", ": run `rlpipe --store "},
		},
		{
			name:  "store exists",
			setup: func(h *harness) {},
			args:  []string{"init-store"},
			code:  ExitFailure,
			want:  []string{"a store already exists at "},
		},
		{
			name:  "unknown ref",
			setup: committed,
			args:  []string{"log", "nope"},
			code:  ExitFailure,
			want:  []string{`"nope"`, "`rlpipe branch list`"},
		},
		{
			name:  "unknown object",
			setup: committed,
			args:  []string{"cat", "main:data/y.txt"},
			code:  ExitFailure,
			want:  []string{"cat main:data/y.txt", "object not found", "rlpipe ls REF:PREFIX"},
		},
		{
			name:  "malformed ref",
			setup: committed,
			args:  []string{"log", "main~x"},
			code:  ExitUsage,
			want:  []string{"invalid ref", "usage: rlpipe log [REF]"},
		},
		{
			name:  "branch exists",
			setup: committed,
			args:  []string{"branch", "create", "b", "--from", "main"},
			code:  ExitFailure,
			want:  []string{"branch b already exists", "rlpipe branch delete b"},
		},
		{
			name:  "invalid branch name",
			setup: committed,
			args:  []string{"branch", "create", "a/b"},
			code:  ExitUsage,
			want:  []string{`branch name "a/b"`},
		},
		{
			name:  "delete default branch",
			setup: committed,
			args:  []string{"branch", "delete", "main"},
			code:  ExitFailure,
			want:  []string{"branch main is the store's default branch"},
		},
		{
			name:  "tag exists",
			setup: committed,
			args:  []string{"tag", "create", "v1", "b"},
			code:  ExitFailure,
			want:  []string{"tag v1 already exists"},
		},
		{
			name:  "write to a tag",
			setup: committed,
			args:  []string{"rm", "v1:data/x.txt"},
			code:  ExitUsage,
			want:  []string{"v1 is not a branch"},
		},
		{
			name:  "empty commit",
			setup: committed,
			args:  []string{"commit", "main", "-m", "nothing"},
			code:  ExitFailure,
			want:  []string{"nothing to commit on main", "rlpipe import", "--allow-empty"},
		},
		{
			name:  "commit without message",
			setup: committed,
			args:  []string{"commit", "main"},
			code:  ExitUsage,
			want:  []string{"a commit needs a message: -m MSG"},
		},
		{
			name: "dirty-branch merge",
			setup: func(h *harness) {
				committed(h)
				h.stdin = "v2\n"
				h.ok("put", "-", "b:data/x.txt")
				h.ok("commit", "b", "-m", "v2")
				h.ok("put", "-", "main:data/staged.txt")
			},
			args: []string{"merge", "b", "main"},
			code: ExitFailure,
			want: []string{"main has uncommitted changes", "rlpipe commit main -m MSG", "rlpipe branch reset main"},
		},
		{
			name: "merge conflict",
			setup: func(h *harness) {
				committed(h)
				for _, side := range []string{"main", "b"} {
					for _, p := range []string{"data/x.txt", "data/z.txt"} {
						h.stdin = side + " " + p
						h.ok("put", "-", side+":"+p)
					}
					h.ok("commit", side, "-m", "change on "+side)
				}
			},
			args: []string{"merge", "b", "main"},
			code: ExitFailure,
			want: []string{
				"merge b into main: 2 paths changed on both sides:\n  data/x.txt\n  data/z.txt\n",
				"rlpipe merge b main --strategy source-wins",
				"rlpipe merge b main --strategy dest-wins",
			},
		},
		{
			name:  "nothing to merge",
			setup: committed,
			args:  []string{"merge", "b", "main"},
			code:  ExitFailure,
			want:  []string{"nothing to merge", "--allow-empty"},
		},
		{
			name:  "bad strategy",
			setup: committed,
			args:  []string{"merge", "b", "main", "--strategy", "ours"},
			code:  ExitUsage,
			want:  []string{`invalid --strategy "ours"`},
		},
		{
			name:  "unknown command",
			setup: committed,
			args:  []string{"brunch", "list"},
			code:  ExitUsage,
			want:  []string{`unknown command "brunch" for "rlpipe"`, `did you mean "branch"?`},
		},
		{
			name:  "unknown subcommand",
			setup: committed,
			args:  []string{"branch", "lst"},
			code:  ExitUsage,
			want:  []string{`unknown command "lst" for "rlpipe branch"`},
		},
		{
			name:  "unknown flag",
			setup: committed,
			args:  []string{"log", "main", "--bogus"},
			code:  ExitUsage,
			want:  []string{"unknown flag: --bogus", "see `rlpipe log --help`"},
		},
		{
			name:  "missing argument",
			setup: committed,
			args:  []string{"merge", "b"},
			code:  ExitUsage,
			want:  []string{"merge: missing DEST", "usage: rlpipe merge SOURCE DEST"},
		},
		{
			name:  "extra argument",
			setup: committed,
			args:  []string{"cat", "main:a", "main:b"},
			code:  ExitUsage,
			want:  []string{`cat: unexpected argument "main:b"`},
		},
		{
			name:  "bad output format",
			setup: committed,
			args:  []string{"log", "-o", "yaml"},
			code:  ExitUsage,
			want:  []string{`invalid -o "yaml": use text or json`},
		},
		{
			name:  "bad meta",
			setup: committed,
			args:  []string{"commit", "main", "-m", "x", "--meta", "novalue", "--allow-empty"},
			code:  ExitUsage,
			want:  []string{`invalid --meta "novalue": use KEY=VALUE`},
		},
		{
			name:  "unknown store scheme",
			setup: committed,
			args:  []string{"--store", "s3://bucket/x", "log"},
			code:  ExitUsage,
			want:  []string{"no backend for s3://"},
		},
		{
			name:  "unconfigured lakeFS",
			setup: committed,
			args:  []string{"--store", "lakefs://repo", "log"},
			code:  ExitFailure,
			want:  []string{"lakefs://repo"},
		},
		{
			name:  "bad row",
			setup: committed,
			args:  []string{"import", "FILE:bad.jsonl", "main:data/bad.parquet", "--table", "prompts"},
			code:  ExitFailure,
			want:  []string{"bad.jsonl line 1"},
		},
		{
			name:  "unknown table",
			setup: committed,
			args:  []string{"import", "FILE:bad.jsonl", "main:data/bad.parquet", "--table", "nope"},
			code:  ExitUsage,
			want:  []string{`unknown table "nope"`, "prompts"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				h.ok("init-store")
				tc.setup(h)
			}
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				if name, ok := strings.CutPrefix(a, "FILE:"); ok {
					a = h.file(name, `{"prompt_id":"p1","prompt":"1+1="}`+"\n")
				}
				args[i] = a
			}
			h.fails(tc.code, tc.want, args...)
		})
	}
}

// TestMissingDefaultStore checks the message for the store most users
// have: ./.rlpipe in the working directory.
func TestMissingDefaultStore(t *testing.T) {
	h := newHarness(t)
	t.Chdir(h.dir)
	r := h.runRaw("ls", "main:")
	if r.code != ExitFailure || r.stderr != "rlpipe: no store at ./.rlpipe: run `rlpipe init-store`\n" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// RLPIPE_STORE picks the store when --store is not given.
	h.env[EnvStore] = filepath.Join(h.dir, "elsewhere")
	if r := h.runRaw("init-store"); r.code != ExitOK {
		t.Fatalf("init-store with %s: exit %d: %s", EnvStore, r.code, r.stderr)
	}
	if r := h.runRaw("log", "main"); r.code != ExitOK {
		t.Fatalf("log with %s: exit %d: %s", EnvStore, r.code, r.stderr)
	}
}

// TestAmbiguousRef makes commits until two ids share their first digit,
// then names a commit by that digit.
func TestAmbiguousRef(t *testing.T) {
	h := newStore(t)
	seen := map[byte]bool{}
	for i := 0; ; i++ {
		var c artifacts.Commit
		h.json(&c, "commit", "main", "-m", "empty", "--allow-empty")
		if seen[c.ID[0]] {
			h.fails(ExitUsage, []string{"ambiguous", "use a longer prefix"}, "log", c.ID[:1])
			// A longer prefix names one commit.
			h.ok("log", c.ID[:12], "--limit", "1")
			return
		}
		seen[c.ID[0]] = true
		if i > 16 {
			t.Fatal("17 commit ids with distinct first hex digits")
		}
	}
}

// TestWithoutVerifierOrCollector checks the messages of fsck and gc on a
// backend with no check of its own and that collects its own garbage, as
// lakeFS does: the embedded store with its Verifier and Collector hidden
// behind the bare interface.
func TestWithoutVerifierOrCollector(t *testing.T) {
	bare := struct{ artifacts.Store }{newLocalStore(t)}
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, st artifacts.Store, p printer) error
		want string
	}{
		{
			name: "fsck without a Verifier",
			run: func(ctx context.Context, st artifacts.Store, p printer) error {
				return fsckFunc(ctx, st, "lakefs://repo", fsckOptions{}, p)
			},
			want: "the store at lakefs://repo cannot be checked from rlpipe: its backend has no check (check its storage with the backend's own tools)",
		},
		{
			name: "gc without a Collector",
			run: func(ctx context.Context, st artifacts.Store, p printer) error {
				return gcFunc(ctx, st, "lakefs://repo", gcOptions{}, p)
			},
			want: "lakeFS runs its own garbage collection",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := tc.run(context.Background(), bare, printer{w: &out})
			if err == nil || exitCode(err) != ExitFailure || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v (exit %d)", tc.name, err, exitCode(err))
			}
		})
	}
}

// TestGCDryRun: the embedded store collects.
func TestGCDryRun(t *testing.T) {
	h := newStore(t)
	var res gcOut
	h.json(&res, "gc", "--dry-run")
	if !res.DryRun {
		t.Fatalf("gc --dry-run: %+v", res)
	}
}

// TestCredentialsRedacted checks that credentials — lakectl's and those
// of `rlpipe store serve` — never reach stderr, in an error message or a
// log line.
func TestCredentialsRedacted(t *testing.T) {
	for _, vars := range [][2]string{
		{"LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "LAKECTL_CREDENTIALS_ACCESS_KEY_ID"},
		{"RLPIPE_STORE_SECRET_ACCESS_KEY", "RLPIPE_STORE_ACCESS_KEY_ID"},
	} {
		const secret = "s3cr3t-Key-Value"
		h := newHarness(t)
		h.env[vars[0]] = secret
		h.env[vars[1]] = "AKIAEXAMPLEKEY"
		h.store = filepath.Join(h.dir, secret, "AKIAEXAMPLEKEY")
		r := h.run("--log-level", "trace", "log", "main")
		if r.code != ExitFailure || !strings.Contains(r.stderr, "no store at") {
			t.Fatalf("%s: exit %d: %s", vars[0], r.code, r.stderr)
		}
		for _, s := range []string{secret, "AKIAEXAMPLEKEY"} {
			if strings.Contains(r.stderr, s) || strings.Contains(r.stdout, s) {
				t.Fatalf("%s: output holds a credential:\n%s%s", vars[0], r.stdout, r.stderr)
			}
		}
		if !strings.Contains(r.stderr, redacted) {
			t.Fatalf("%s: stderr lacks %s:\n%s", vars[0], redacted, r.stderr)
		}
	}
}

// The dirty-branch explanation of merge and revert reads exactly as it did
// when each command spelled it, and still wraps the store's error.
func TestExplainDirty(t *testing.T) {
	for _, tc := range []struct {
		name             string
		op, branch, more string
		want             string
	}{
		{"merge", "merge b into main", "main", "(`rlpipe diff main` lists them)",
			"merge b into main: main has uncommitted changes\n" +
				"commit them first:  rlpipe commit main -m MSG\n" +
				"or discard them:    rlpipe branch reset main\n" +
				"(`rlpipe diff main` lists them)"},
		{"revert", "revert v1 on main", "main", "",
			"revert v1 on main: main has uncommitted changes\n" +
				"commit them first:  rlpipe commit main -m MSG\n" +
				"or discard them:    rlpipe branch reset main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := explainDirty(artifacts.ErrDirtyBranch, tc.op, tc.branch, tc.more)
			if got := err.Error(); got != tc.want {
				t.Fatalf("message = %q, want %q", got, tc.want)
			}
			if e, ok := err.(*explained); !ok || e.Unwrap() != artifacts.ErrDirtyBranch {
				t.Fatalf("%#v does not wrap ErrDirtyBranch", err)
			}
		})
	}
}
