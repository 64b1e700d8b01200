package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/artifactstest"
	"github.com/rlpipe/rlpipe/artifacts/local"
	"github.com/rlpipe/rlpipe/internal/testproc"
)

func put(t *testing.T, s artifacts.Store, branch, path, body string) {
	t.Helper()
	artifactstest.Put(t, s, branch, path, []byte(body))
}

func read(s artifacts.Store, ref, path string) (string, error) {
	rc, _, err := s.GetObject(context.Background(), ref, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func TestOpenMissingStoreSaysHowToCreate(t *testing.T) {
	_, err := artifacts.Open(context.Background(), filepath.Join(t.TempDir(), "nope"), nil)
	if !errors.Is(err, artifacts.ErrRepositoryNotFound) || !strings.Contains(err.Error(), "rlpipe init-store") {
		t.Fatalf("open missing store: got %v, want ErrRepositoryNotFound naming `rlpipe init-store`", err)
	}
}

// TestNameClashSaysWhatIsInTheWay checks the words of the refusal of a
// ref named like one of the other kind: they name the ref that holds the
// name, and the error is that ref's exists error.
func TestNameClashSaysWhatIsInTheWay(t *testing.T) {
	s := artifactstest.NewLocal(t)
	ctx := context.Background()
	if _, err := s.CreateTag(ctx, "v1", "main"); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateTag(ctx, "main", "main")
	want := `create tag "main": a branch named "main" exists; refs name one or the other (pick another name, or delete the branch first)`
	if !errors.Is(err, artifacts.ErrBranchExists) || !errors.Is(err, artifacts.ErrExists) || errors.Is(err, artifacts.ErrTagExists) || err.Error() != want {
		t.Fatalf("create tag main: got %v, want ErrBranchExists: %s", err, want)
	}
	_, err = s.CreateBranch(ctx, "v1", "main")
	want = `create branch "v1": a tag named "v1" exists; refs name one or the other (pick another name, or delete the tag first)`
	if !errors.Is(err, artifacts.ErrTagExists) || !errors.Is(err, artifacts.ErrExists) || errors.Is(err, artifacts.ErrBranchExists) || err.Error() != want {
		t.Fatalf("create branch v1: got %v, want ErrTagExists: %s", err, want)
	}
}

func TestCreateTwiceFails(t *testing.T) {
	dir := t.TempDir()
	if _, err := local.Create(context.Background(), dir, "main", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Create(context.Background(), dir, "main", nil); !errors.Is(err, artifacts.ErrRepositoryExists) {
		t.Fatalf("second create: got %v, want ErrRepositoryExists", err)
	}
}

// fileSized is a body larger than the objects whose bytes the store keeps
// in its metadata file, so that it gets a blob file of its own.
func fileSized(s string) string { return strings.Repeat(s, 8192/len(s)+1) }

func TestIdenticalBytesStoredOnce(t *testing.T) {
	s := artifactstest.NewLocal(t)
	put(t, s, "main", "a", fileSized("same bytes"))
	put(t, s, "main", "b", fileSized("same bytes"))
	put(t, s, "main", "c", fileSized("other bytes"))
	n := 0
	filepath.WalkDir(filepath.Join(s.Dir(), "blobs"), func(_ string, d os.DirEntry, _ error) error {
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if n != 2 {
		t.Fatalf("blob files = %d, want 2 (identical bytes stored once)", n)
	}
}

// corrupt flips one byte of the blob behind ref:path.
func corrupt(t *testing.T, s *local.Store, ref, path string) {
	t.Helper()
	artifactstest.CorruptBlob(t, s, artifactstest.Stat(t, s, ref, path).Checksum)
}

func TestCorruptBlobIsReportedNotReturned(t *testing.T) {
	for _, size := range []int{8 << 10, 5 << 20} { // verified up front, and while streaming
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			s := artifactstest.NewLocal(t)
			body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			if _, err := s.PutObject(context.Background(), "main", "x.bin", bytes.NewReader(body), nil); err != nil {
				t.Fatal(err)
			}
			corrupt(t, s, "main", "x.bin")
			rc, _, err := s.GetObject(context.Background(), "main", "x.bin")
			if err == nil {
				_, err = io.ReadAll(rc)
				rc.Close()
			}
			if !errors.Is(err, artifacts.ErrIntegrity) || !strings.Contains(err.Error(), "main:x.bin") {
				t.Fatalf("read corrupted blob: got %v, want ErrIntegrity naming main:x.bin", err)
			}
		})
	}
}

func TestMissingBlobIsIntegrityError(t *testing.T) {
	s := artifactstest.NewLocal(t)
	put(t, s, "main", "x", fileSized("hello"))
	st, _ := s.StatObject(context.Background(), "main", "x")
	os.Remove(filepath.Join(s.Dir(), "blobs", st.Checksum[:2], st.Checksum))
	if _, err := read(s, "main", "x"); !errors.Is(err, artifacts.ErrIntegrity) {
		t.Fatalf("read with missing blob: got %v, want ErrIntegrity", err)
	}
}

// The crash and multi-process tests re-run this test binary as a child
// process in one of these roles.
const (
	envRole  = "RLPIPE_LOCAL_TEST_ROLE"
	envStore = "RLPIPE_LOCAL_TEST_STORE"
	envName  = "RLPIPE_LOCAL_TEST_NAME"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "":
		os.Exit(m.Run())
	case "committer":
		os.Exit(committer(os.Getenv(envStore), os.Getenv(envName), -1))
	case "committer10":
		os.Exit(committer(os.Getenv(envStore), os.Getenv(envName), 10))
	case "putter":
		os.Exit(putter(os.Getenv(envStore), os.Getenv(envName)))
	}
}

// putterBody is what putter writes at path: small (its bytes ride the
// staging transaction) for even i, a blob file of its own for odd i.
func putterBody(path string, i int) string {
	if i%2 == 0 {
		return path
	}
	return fileSized(path)
}

// putter puts objects forever, printing each path once PutObject has
// returned.
func putter(dir, name string) int {
	ctx := context.Background()
	s, err := local.Open(ctx, dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; ; i++ {
		p := fmt.Sprintf("%s/%06d", name, i)
		if _, err := s.PutObject(ctx, "main", p, strings.NewReader(putterBody(p, i)), nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(p)
	}
}

// TestKillDuringPut kills a process that stages objects, small and large,
// and checks that every object it reported written reads back whole: a
// small object's bytes and the record naming them are one transaction, a
// large one's blob is synced before its record.
func TestKillDuringPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range testproc.ChaosTrials(t, 3) {
		t.Run(strconv.Itoa(trial), func(t *testing.T) {
			s, printed := killMidFlight(t, rng, "putter", "p")
			if len(printed) < 2 {
				t.Fatalf("the child reported %d objects before SIGKILL; want a small and a large one at least", len(printed))
			}
			t.Logf("child reported %d objects before SIGKILL", len(printed))
			for i, p := range printed {
				got, err := read(s, "main", p)
				if err != nil || got != putterBody(p, i) {
					t.Fatalf("object %s, reported written, after SIGKILL: %d bytes, %v", p, len(got), err)
				}
			}
			res, err := s.Verify(context.Background(), nil)
			if err != nil || len(res.Damage) != 0 {
				t.Fatalf("verify after SIGKILL: %v, %v", res.Damage, err)
			}
		})
	}
}

// committer puts a file and commits, n times (forever if n < 0), printing
// each commit id it made on stdout.
func committer(dir, name string, n int) int {
	ctx := context.Background()
	s, err := local.Open(ctx, dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; n < 0 || i < n; i++ {
		for j := 0; j < 3; j++ {
			p := fmt.Sprintf("%s/%06d/%d", name, i, j)
			if _, err := s.PutObject(ctx, "main", p, strings.NewReader(p), nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		c, err := s.Commit(ctx, "main", name+" "+strconv.Itoa(i), nil)
		switch {
		case errors.Is(err, artifacts.ErrNoChanges): // the other process committed our files with its own
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			return 1
		default:
			fmt.Println(c.ID)
		}
	}
	return 0
}

// killMidFlight starts a child in role on a fresh store, kills it with
// SIGKILL after 200 to 1,000 ms, and returns the store and the words the
// child printed before it died.
func killMidFlight(t *testing.T, rng *rand.Rand, role, name string) (*local.Store, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := local.Create(context.Background(), dir, "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := child(t, role, dir, name)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	return s, strings.Fields(out.String())
}

func child(t *testing.T, role, dir, name string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envStore+"="+dir, envName+"="+name)
	cmd.Stderr = os.Stderr
	return cmd
}

// checkConsistent walks every branch's history and reads every object.
func checkConsistent(t *testing.T, s artifacts.Store) (commits int) {
	t.Helper()
	ctx := context.Background()
	for c, err := range s.Log(ctx, "main", nil) {
		if err != nil {
			t.Fatalf("log after crash: %v", err)
		}
		commits++
		_ = c
	}
	for e, err := range s.ListObjects(ctx, "main", nil) {
		if err != nil {
			t.Fatalf("list after crash: %v", err)
		}
		got, err := read(s, "main", e.Path)
		if err != nil || got != e.Path {
			t.Fatalf("read %s after crash: %q, %v", e.Path, got, err)
		}
	}
	return commits
}

func TestKillDuringCommit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range testproc.ChaosTrials(t, 3) {
		t.Run(strconv.Itoa(trial), func(t *testing.T) {
			// Let it commit a few times, then kill it mid-flight.
			s, printed := killMidFlight(t, rng, "committer", "w")
			t.Logf("child made %d commits before SIGKILL", len(printed))
			n := checkConsistent(t, s)
			// Every commit the child reported is in history; at most one
			// more (committed, killed before printing) may be there.
			if n-1 < len(printed) || n-1 > len(printed)+1 {
				t.Fatalf("history has %d commits after the initial one; the child reported %d", n-1, len(printed))
			}
			// Staged changes survived and the branch still commits.
			put(t, s, "main", "after/crash", "after/crash")
			if _, err := s.Commit(context.Background(), "main", "after crash", nil); err != nil {
				t.Fatalf("commit after crash: %v", err)
			}
			checkConsistent(t, s)
		})
	}
}

func TestTwoProcessesCommitToOneBranch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := local.Create(context.Background(), dir, "main", nil)
	if err != nil {
		t.Fatal(err)
	}
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = child(t, "committer10", dir, fmt.Sprintf("p%d", i))
		cmds[i].Stdout = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	inLog := map[string]bool{}
	for c, err := range s.Log(context.Background(), "main", nil) {
		if err != nil {
			t.Fatal(err)
		}
		inLog[c.ID] = true
	}
	for i := range outs {
		for _, id := range strings.Fields(outs[i].String()) {
			if !inLog[id] {
				t.Fatalf("commit %s reported by process %d is not in main's history: a lost commit", id, i)
			}
		}
	}
	n := 0
	for e, err := range s.ListObjects(context.Background(), "main", nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = e
	}
	if n != 2*10*3 {
		t.Fatalf("main holds %d objects, want 60 (every put of both processes)", n)
	}
}

// A commit date JSON cannot hold (after the year 9999) fails the commit,
// saying it was the commit's encoding, and leaves the branch where it was.
func TestCommitDateOutOfRange(t *testing.T) {
	ctx := context.Background()
	s := artifactstest.NewLocal(t)
	put(t, s, "main", "a.txt", "a")
	before, err := s.GetBranch(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Commit(ctx, "main", "far future", &artifacts.CommitOptions{Date: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	want := "commit main: commit id: encode the commit: json: error calling MarshalJSON for type time.Time: Time.MarshalJSON: year outside of range [0,9999]"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if after, err := s.GetBranch(ctx, "main"); err != nil || after.CommitID != before.CommitID {
		t.Errorf("main moved from %s to %s (%v)", before.CommitID, after.CommitID, err)
	}
}
