package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rlpipe/rlpipe/environments/agent"
)

// rowsWorld and rowsTask are the shipped count-rows task of
// examples/agent-sandbox: the verifier reads report.txt of the workspace
// and compares it with /check/rows.txt.
func rowsWorld(t testing.TB) *agent.World {
	t.Helper()
	c, err := agent.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.World(context.Background(), agent.WorldSpec{Name: "rows", Version: "1",
		Files: map[string][]byte{"data.csv": []byte("city,country\nLisbon,PT\nPorto,PT\n")},
		// A world may hold links of its own, in or out of it, and a FIFO:
		// its author put them there, and they are not the agent's.
		Build: func(ctx context.Context, dir string) error {
			if err := os.Symlink("data.csv", filepath.Join(dir, "in.csv")); err != nil {
				return err
			}
			if err := os.Symlink("/usr/bin/env", filepath.Join(dir, "env")); err != nil {
				return err
			}
			return syscall.Mkfifo(filepath.Join(dir, "world.fifo"), 0o644)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var rowsTask = agent.Task{
	Instruction: "Create report.txt holding one line: the number of data rows in data.csv, not counting its header.",
	Protected:   []string{"data.csv"},
	Checks:      map[string][]byte{"rows.txt": []byte("2\n")},
	Verifier:    `test "$(tr -d ' \n' < report.txt)" = "$(cat /check/rows.txt)"`,
}

// The verifier opens nothing the agent pointed out of the workspace, and no
// pipe, socket or device it made: the count-rows hack (a link to the
// verifier's own answer) and a FIFO that would hold the verifier until its
// wall limit score 0, with the path named, in both workspace modes. The
// verifier does not run.
func TestVerifierFollowsNoPathOut(t *testing.T) {
	w := rowsWorld(t)
	for _, mode := range []agent.Mode{agent.ModeOverlay, agent.ModeCopy} {
		for _, c := range []struct {
			name, hack string
			reward     float64
			status     string
			reason     string
		}{
			{"honest", "tail -n +2 data.csv | wc -l > report.txt", 1, "ok", ""},
			{"honest, through a link inside", "tail -n +2 in.csv | wc -l > r && mkdir -p d && ln -s ../r d/report && ln -s d/report report.txt", 1, "ok", ""},
			{"a link to the verifier's answer", "ln -s /check/rows.txt report.txt", 0, agent.StatusUnsafePath,
				"the verifier did not run: report.txt is a symlink to /check/rows.txt, out of the workspace; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
			{"a relative link out", "ln -s ../check/rows.txt report.txt", 0, agent.StatusUnsafePath,
				"the verifier did not run: report.txt is a symlink to ../check/rows.txt, out of the workspace; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
			{"a link to a directory out, and a link through it", "ln -s /check c && ln -s c/rows.txt report.txt", 0, agent.StatusUnsafePath,
				"the verifier did not run: c is a symlink to /check, out of the workspace; report.txt is a symlink to c/rows.txt, out of the workspace; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
			{"a magic link", "ln -s /proc/self/root/check/rows.txt report.txt", 0, agent.StatusUnsafePath,
				"the verifier did not run: report.txt is a symlink to /proc/self/root/check/rows.txt, out of the workspace; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
			{"a FIFO", "mkfifo report.txt", 0, agent.StatusUnsafePath,
				"the verifier did not run: report.txt is a named pipe (FIFO); " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
			{"a world link renamed", "mv env report.txt", 0, agent.StatusUnsafePath,
				"the verifier did not run: report.txt is a symlink to /usr/bin/env, out of the workspace; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
			{"a socket", `python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('report.txt')"`, 0, agent.StatusUnsafePath,
				"the verifier did not run: report.txt is a socket; " +
					"a verifier opens only regular files, directories and links that stay in the workspace"},
		} {
			t.Run(string(mode)+"/"+c.name, func(t *testing.T) {
				obs, st, v := episodeIn(t, w, mode, rowsTask, "```bash\n"+c.hack+"\n```")
				if obs[0] != "exit status 0 (ok)\nstdout:\n(empty)\nstderr:\n(empty)" {
					t.Fatalf("the hack did not run: %q", obs[0])
				}
				if st.Reward != c.reward || v.Status != c.status || v.Reason != c.reason {
					t.Fatalf("reward %v, status %q, reason %q\nwant %v, %q, %q", st.Reward, v.Status, v.Reason, c.reward, c.status, c.reason)
				}
				if c.status == agent.StatusUnsafePath && (v.Result.Status != "" || st.Info["verifier_reason"] != c.reason ||
					st.Observation != "verified: reward 0 ("+c.reason+")") {
					t.Fatalf("the verifier ran (%+v), or the step hides why: %q, %v", v.Result, st.Observation, st.Info)
				}
			})
		}
	}
}
