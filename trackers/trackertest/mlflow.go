package trackertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlpipe/rlpipe/trackers"
)

// MLflowServer starts a real MLflow tracking server from the tracker
// venv on a loopback port, with a SQLite store in a temporary directory
// and the artifacts served through it, and stops it when the test ends.
// It returns the server's URI.
func MLflowServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(Python(t)), "mlflow")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	logs := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	// Artifacts go through the server's proxy (mlflow-artifacts:/), as
	// with a remote server: a tracker uploads them over HTTP.
	cmd := exec.Command(bin, "server", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--workers", "1",
		"--backend-store-uri", "sqlite:///"+filepath.Join(dir, "mlflow.db"), "--serve-artifacts", "--artifacts-destination", filepath.Join(dir, "artifacts"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the server's workers go with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mlflow server log:\n%s", lastLines(logs(), 40))
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	uri := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Readiness, not timing: the server migrates its database first.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(uri + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return uri
			}
		}
		select {
		case <-exited:
			t.Fatalf("mlflow server exited:\n%s", logs())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mlflow server not up after 3 minutes:\n%s", logs())
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// MLflowRun is what the server's REST API returns of a run.
type MLflowRun struct {
	ID     string
	Status string // RUNNING, FINISHED, FAILED or KILLED
	// EndTime is the end time in milliseconds since the epoch, 0 when the
	// server has none.
	EndTime int64
	Tags    map[string]string
}

// Outcome is r's status as a trackers.Status.
func (r MLflowRun) Outcome() trackers.Status {
	switch r.Status {
	case "FINISHED":
		return trackers.Finished
	case "FAILED":
		return trackers.Failed
	case "KILLED":
		return trackers.Killed
	}
	return trackers.Running
}

// OneMLflowRun is the one run of experiment that records rlpipe run name;
// the test fails when there is none or more than one.
func OneMLflowRun(t testing.TB, uri, experiment, name string) MLflowRun {
	t.Helper()
	found := MLflowRuns(t, uri, experiment, name)
	if len(found) != 1 {
		t.Fatalf("experiment %s holds %d MLflow runs of %s, want 1: %+v", experiment, len(found), name, found)
	}
	return found[0]
}

// MLflowRuns reads the runs of experiment (by name) that record rlpipe
// run name (tag trackers.TagRun) from the server at uri
// (experiments/get-by-name, runs/search); none when the experiment is
// missing.
func MLflowRuns(t testing.TB, uri, experiment, name string) []MLflowRun {
	t.Helper()
	api := strings.TrimRight(uri, "/") + "/api/2.0/mlflow/"
	var exp struct {
		Experiment struct {
			ID string `json:"experiment_id"`
		} `json:"experiment"`
	}
	if code := callJSON(t, http.MethodGet, api+"experiments/get-by-name?experiment_name="+url.QueryEscape(experiment), nil, &exp); code == http.StatusNotFound {
		return nil
	}
	var found struct {
		Runs []struct {
			Info struct {
				RunID   string          `json:"run_id"`
				Status  string          `json:"status"`
				EndTime json.RawMessage `json:"end_time"`
			} `json:"info"`
			Data struct {
				Tags []struct{ Key, Value string } `json:"tags"`
			} `json:"data"`
		} `json:"runs"`
	}
	filter := fmt.Sprintf("tags.`%s` = '%s'", trackers.TagRun, name)
	callJSON(t, http.MethodPost, api+"runs/search", map[string]any{"experiment_ids": []string{exp.Experiment.ID}, "filter": filter}, &found)
	var out []MLflowRun
	for _, r := range found.Runs {
		run := MLflowRun{ID: r.Info.RunID, Status: r.Info.Status, Tags: map[string]string{}}
		if s := strings.Trim(string(r.Info.EndTime), `"`); s != "" && s != "null" {
			if _, err := fmt.Sscan(s, &run.EndTime); err != nil {
				t.Fatalf("run %s: end_time %s", r.Info.RunID, r.Info.EndTime)
			}
		}
		for _, tag := range r.Data.Tags {
			run.Tags[tag.Key] = tag.Value
		}
		out = append(out, run)
	}
	return out
}

// MLflowSteps reads the steps of metric key of run id, in the order the
// server returns them (metrics/get-history).
func MLflowSteps(t testing.TB, uri, id, key string) []int {
	t.Helper()
	var h struct {
		Metrics []struct {
			Step int `json:"step"`
		} `json:"metrics"`
	}
	callJSON(t, http.MethodGet, strings.TrimRight(uri, "/")+"/api/2.0/mlflow/metrics/get-history?run_id="+id+"&metric_key="+url.QueryEscape(key), nil, &h)
	var out []int
	for _, m := range h.Metrics {
		out = append(out, m.Step)
	}
	return out
}

// callJSON makes one REST call and decodes its answer into out; it
// returns 404 (a missing resource) rather than failing on it.
func callJSON(t testing.TB, method, u string, in, out any) int {
	t.Helper()
	var body *strings.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = strings.NewReader(string(b))
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return resp.StatusCode
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", method, u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return resp.StatusCode
}

// MLflowArtifacts reads the files of run id under dir (its artifact path,
// "checkpoints/iteration-000002") through the server's REST API
// (artifacts/list, then each file from the artifact proxy): path below
// dir → content.
func MLflowArtifacts(t testing.TB, uri, id, dir string) map[string]string {
	t.Helper()
	base := strings.TrimRight(uri, "/")
	var list struct {
		RootURI string `json:"root_uri"`
		Files   []struct {
			Path  string `json:"path"`
			IsDir bool   `json:"is_dir"`
		} `json:"files"`
	}
	callJSON(t, http.MethodGet, base+"/api/2.0/mlflow/artifacts/list?run_id="+id+"&path="+url.QueryEscape(dir), nil, &list)
	root, ok := strings.CutPrefix(list.RootURI, "mlflow-artifacts:/")
	if !ok {
		t.Fatalf("run %s: artifact root %q is not served by the server", id, list.RootURI)
	}
	out := map[string]string{}
	for _, f := range list.Files {
		if f.IsDir {
			continue
		}
		resp, err := http.Get(base + "/api/2.0/mlflow-artifacts/artifacts/" + strings.TrimPrefix(root, "/") + "/" + f.Path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("artifact %s of run %s: %s %v", f.Path, id, resp.Status, err)
		}
		out[strings.TrimPrefix(f.Path, dir+"/")] = string(b)
	}
	return out
}

// MLflowParams reads the parameters of run id (runs/get).
func MLflowParams(t testing.TB, uri, id string) map[string]string {
	t.Helper()
	var got struct {
		Run struct {
			Data struct {
				Params []struct{ Key, Value string } `json:"params"`
			} `json:"data"`
		} `json:"run"`
	}
	callJSON(t, http.MethodGet, strings.TrimRight(uri, "/")+"/api/2.0/mlflow/runs/get?run_id="+id, nil, &got)
	out := map[string]string{}
	for _, p := range got.Run.Data.Params {
		out[p.Key] = p.Value
	}
	return out
}
