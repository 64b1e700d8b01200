package trackers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MLflowOptions are an mlflow tracking entry's keys. Credentials are never
// keys: they come from the environment, as MLflow's own clients read them
// (MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and
// MLFLOW_TRACKING_PASSWORD), so they reach neither the store nor a log.
type MLflowOptions struct {
	// URI is the tracking server's address, http://HOST:PORT.
	URI string `yaml:"uri"`
	// Experiment names the MLflow experiment the run goes in (default
	// "rlpipe"); it is created when missing.
	Experiment string `yaml:"experiment,omitempty"`
	// Artifacts: "checkpoints" uploads the adapter (or weights) of every
	// evaluated checkpoint to the run's artifacts, under
	// checkpoints/iteration-NNNNNN; "" none.
	Artifacts string `yaml:"artifacts,omitempty"`
}

// DefaultExperiment is the experiment an mlflow entry without one uses.
const DefaultExperiment = "rlpipe"

// Validate says what an mlflow entry misses.
func (o *MLflowOptions) Validate() error {
	if o.URI == "" {
		return errors.New(`uri: missing (the tracking server, e.g. uri: "http://127.0.0.1:5000")`)
	}
	u, err := url.Parse(o.URI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("uri: %q is not an http:// or https:// address", o.URI)
	}
	if u.User != nil {
		return errors.New("uri: holds credentials; set MLFLOW_TRACKING_TOKEN (or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD) in the environment instead")
	}
	return validateArtifacts(o.Artifacts)
}

// Where is the server's address.
func (o *MLflowOptions) Where() string { return o.URI }

// MLflowBackend records runs in an MLflow server: the value cli/kinds registers
// as kind mlflow.
var MLflowBackend Backend = mlflowBackend{}

type mlflowBackend struct{}

func (mlflowBackend) Name() string { return "mlflow" }

func (mlflowBackend) Options() any { return &MLflowOptions{} }

func (mlflowBackend) Target(uri string) any { return &MLflowOptions{URI: uri} }

func (mlflowBackend) Noun() string { return "an mlflow tracker" }

func (mlflowBackend) Open(opts any) (Tracker, error) {
	o, ok := opts.(*MLflowOptions)
	if !ok {
		return nil, fmt.Errorf("mlflow: options are %T, want *MLflowOptions", opts)
	}
	exp := o.Experiment
	if exp == "" {
		exp = DefaultExperiment
	}
	uri := strings.TrimRight(o.URI, "/")
	return &MLflow{base: uri + "/api/2.0/mlflow/", artifactsBase: uri + "/api/2.0/mlflow-artifacts/artifacts/", experiment: exp,
		checkpoints: o.Artifacts == ArtifactsCheckpoints, client: &http.Client{}, env: os.Getenv}, nil
}

// MLflow records a run in an MLflow tracking server through its REST API:
// one MLflow run per rlpipe run, found again by its tag TagRun when the
// rlpipe run resumes or is back-filled, so that its points append. End
// sets the MLflow run's status (FINISHED, FAILED or KILLED) and end time;
// Start re-opens an ended one (RUNNING), so that a resumed run shows as
// running in the same MLflow run until it ends again. Scalars
// are metrics at their steps, timestamped with their commit's time; the
// config's keys are parameters; each step's commit is the tag
// "rlpipe.commit.NNNNNN", and the config's hash the tag
// "rlpipe.config_hash".
//
// With artifacts: checkpoints, each evaluated checkpoint's files go to
// the run's artifacts under checkpoints/<name> (KeepCheckpoint).
//
// MLflow allows fewer characters in names than rlpipe's tags use: '@'
// becomes "_at_" ("eval/heldout/pass_at_1"), '^' "_hat_", "[i]" ".i",
// and any other character outside letters, digits and "_-./ :" '_'.
type MLflow struct {
	base       string
	experiment string
	client     *http.Client
	env        func(string) string
	runID      string
	// artifactsBase is the server's artifact proxy; artifactURI the run's
	// artifact root; checkpoints says the entry keeps checkpoints.
	artifactsBase string
	artifactURI   string
	checkpoints   bool
	// found is the MLflow run as Start first found it, before re-opening
	// it: how an earlier attempt of the run ended.
	found *mlflowRunInfo
}

// TagRun is the MLflow tag that names the rlpipe run an MLflow run records.
const TagRun = "rlpipe.run"

// MLflow's batch limits (log-batch).
const (
	mlflowMetricsPerBatch = 1000
	mlflowParamsPerBatch  = 100
	mlflowParamMax        = 6000
)

// Start finds the MLflow run of r (creating the experiment and the run
// when missing), re-opens it (status RUNNING) when it had ended, and logs
// the parameters it lacks.
func (m *MLflow) Start(ctx context.Context, r Run) error {
	expID, err := m.experimentID(ctx)
	if err != nil {
		return err
	}
	var found struct {
		Runs []mlflowRun `json:"runs"`
	}
	filter := fmt.Sprintf("tags.`%s` = '%s'", TagRun, strings.ReplaceAll(r.Name, "'", `\'`))
	if err := m.call(ctx, http.MethodPost, "runs/search", map[string]any{"experiment_ids": []string{expID}, "filter": filter, "max_results": 1}, &found); err != nil {
		return err
	}
	var run mlflowRun
	if len(found.Runs) > 0 {
		run = found.Runs[0]
	} else {
		var created struct {
			Run mlflowRun `json:"run"`
		}
		if err := m.call(ctx, http.MethodPost, "runs/create", map[string]any{"experiment_id": expID, "run_name": r.Name,
			"start_time": time.Now().UnixMilli(), "tags": []kv{{TagRun, r.Name}}}, &created); err != nil {
			return err
		}
		run = created.Run
	}
	if run.Info.RunID == "" {
		return errors.New("mlflow: the server returned a run without an id")
	}
	if m.found == nil {
		info := run.Info
		m.found = &info
	}
	if run.Info.Status != "" && run.Info.Status != mlflowRunning {
		// Ended by an earlier attempt of the run: this one goes on in it.
		if err := m.call(ctx, http.MethodPost, "runs/update", map[string]any{"run_id": run.Info.RunID, "status": mlflowRunning}, nil); err != nil {
			return err
		}
	}
	have := map[string]bool{}
	for _, p := range run.Data.Params {
		have[p.Key] = true
	}
	// A parameter is immutable in MLflow: one the run has keeps the value
	// it was first logged with; the config hash tag tells the configs apart.
	params := []kv{} // never null: the server rejects a null list
	for k, v := range r.Params {
		if k = mlflowName(k); !have[k] {
			params = append(params, kv{k, truncate(v, mlflowParamMax)})
		}
	}
	sort.Slice(params, func(i, j int) bool { return params[i].Key < params[j].Key })
	tags := []kv{{TagRun, r.Name}}
	if r.ConfigHash != "" {
		tags = append(tags, kv{"rlpipe.config_hash", r.ConfigHash})
	}
	for len(params) > 0 || len(tags) > 0 {
		n := min(len(params), mlflowParamsPerBatch)
		body := map[string]any{"run_id": run.Info.RunID, "params": params[:n], "tags": tags}
		if err := m.call(ctx, http.MethodPost, "runs/log-batch", body, nil); err != nil {
			return err
		}
		params, tags = params[n:], []kv{}
	}
	m.runID, m.artifactURI = run.Info.RunID, run.Info.ArtifactURI
	return nil
}

// experimentID finds the experiment by name, creating it when missing.
func (m *MLflow) experimentID(ctx context.Context) (string, error) {
	for range 2 {
		var got struct {
			Experiment struct {
				ID string `json:"experiment_id"`
			} `json:"experiment"`
		}
		err := m.call(ctx, http.MethodGet, "experiments/get-by-name?experiment_name="+url.QueryEscape(m.experiment), nil, &got)
		if err == nil {
			return got.Experiment.ID, nil
		}
		if !isCode(err, "RESOURCE_DOES_NOT_EXIST") {
			return "", err
		}
		var created struct {
			ID string `json:"experiment_id"`
		}
		err = m.call(ctx, http.MethodPost, "experiments/create", map[string]any{"name": m.experiment}, &created)
		if err == nil {
			return created.ID, nil
		}
		if !isCode(err, "RESOURCE_ALREADY_EXISTS") { // another process created it: look again
			return "", err
		}
	}
	return "", fmt.Errorf("mlflow: experiment %q: neither found nor created", m.experiment)
}

// Log sends the points' scalars as metrics and their commits as tags, in
// batches of MLflow's limits.
func (m *MLflow) Log(ctx context.Context, points []Point) error {
	if m.runID == "" {
		return errors.New("mlflow: Log before Start")
	}
	type metric struct {
		Key       string  `json:"key"`
		Value     float64 `json:"value"`
		Timestamp int64   `json:"timestamp"`
		Step      int64   `json:"step"`
	}
	metrics := []metric{} // never null: the server rejects a null list
	tags := map[string]string{}
	last := ""
	for _, p := range points {
		for _, tag := range p.Tags() {
			metrics = append(metrics, metric{mlflowName(tag), p.Scalars[tag], p.Time.UnixMilli(), int64(p.Step)})
		}
		if c := p.Text[TagCommit]; c != "" {
			tags[fmt.Sprintf("rlpipe.commit.%06d", p.Step)] = c
			last = c
		}
	}
	tagList := []kv{}
	for k, v := range tags {
		tagList = append(tagList, kv{k, v})
	}
	sort.Slice(tagList, func(i, j int) bool { return tagList[i].Key < tagList[j].Key })
	if last != "" {
		tagList = append(tagList, kv{"rlpipe.commit", last})
	}
	for len(metrics) > 0 || len(tagList) > 0 {
		nm := min(len(metrics), mlflowMetricsPerBatch)
		nt := min(len(tagList), mlflowParamsPerBatch, mlflowMetricsPerBatch-nm)
		body := map[string]any{"run_id": m.runID, "metrics": metrics[:nm], "tags": tagList[:nt]}
		if err := m.call(ctx, http.MethodPost, "runs/log-batch", body, nil); err != nil {
			return err
		}
		metrics, tagList = metrics[nm:], tagList[nt:]
	}
	return nil
}

// MLflow's run statuses (RunStatus).
const (
	mlflowRunning  = "RUNNING"
	mlflowFinished = "FINISHED"
	mlflowFailed   = "FAILED"
	mlflowKilled   = "KILLED"
)

// End sets the MLflow run's status and end time (runs/update): FINISHED,
// FAILED or KILLED at o's time. Running leaves the run open. Stopped (a
// back-fill of a run that stopped early, cause unknown) keeps the status
// and end time of a run Start found FAILED or KILLED, and makes any other
// FAILED. Without a successful Start there is no run to end: End does
// nothing.
func (m *MLflow) End(ctx context.Context, o Outcome) error {
	if m.runID == "" {
		return nil
	}
	status, end := "", o.EndTime().UnixMilli()
	switch o.Status {
	case Running:
		return nil
	case Finished:
		status = mlflowFinished
	case Failed:
		status = mlflowFailed
	case Killed:
		status = mlflowKilled
	case Stopped:
		status = mlflowFailed
		if f := m.found; f != nil && (f.Status == mlflowFailed || f.Status == mlflowKilled) && f.EndTime > 0 {
			status, end = f.Status, int64(f.EndTime)
		}
	default:
		return fmt.Errorf("mlflow: end run %s: unknown outcome %v", m.runID, o.Status)
	}
	return m.call(ctx, http.MethodPost, "runs/update", map[string]any{"run_id": m.runID, "status": status, "end_time": end}, nil)
}

// RunID is the MLflow run's id ("" before Start).
func (m *MLflow) RunID() string { return m.runID }

type kv struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type mlflowRun struct {
	Info mlflowRunInfo `json:"info"`
	Data struct {
		Params []kv `json:"params"`
	} `json:"data"`
}

// mlflowRunInfo is what Start reads of a run's info.
type mlflowRunInfo struct {
	RunID       string      `json:"run_id"`
	ArtifactURI string      `json:"artifact_uri"`
	Status      string      `json:"status"`
	EndTime     mlflowInt64 `json:"end_time"`
}

// mlflowInt64 reads an int64 the server writes as a JSON number or, as
// protobuf's JSON mapping does, as a string.
type mlflowInt64 int64

func (n *mlflowInt64) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	if err != nil {
		return fmt.Errorf("mlflow: %s is not an integer", b)
	}
	*n = mlflowInt64(v)
	return nil
}

// mlflowError is an error response of the REST API.
type mlflowError struct {
	Status  int
	Code    string `json:"error_code"`
	Message string `json:"message"`
	op      string
}

func (e *mlflowError) Error() string {
	return fmt.Sprintf("mlflow: %s: %d %s: %s", e.op, e.Status, e.Code, e.Message)
}

func isCode(err error, code string) bool {
	var me *mlflowError
	return errors.As(err, &me) && me.Code == code
}

// call makes one REST call; out receives the JSON answer.
func (m *MLflow) call(ctx context.Context, method, op string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("mlflow: %s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, m.base+op, body)
	if err != nil {
		return fmt.Errorf("mlflow: %s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	m.auth(req)
	name, _, _ := strings.Cut(op, "?")
	resp, err := m.client.Do(req)
	if err != nil {
		return fmt.Errorf("mlflow: %s: %w", name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("mlflow: %s: %w", name, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &mlflowError{Status: resp.StatusCode, op: name}
		if json.Unmarshal(raw, e) != nil || e.Code == "" {
			e.Code, e.Message = http.StatusText(resp.StatusCode), truncate(string(raw), 200)
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("mlflow: %s: read the answer: %w", name, err)
	}
	return nil
}

// auth adds the environment's credentials to req.
func (m *MLflow) auth(req *http.Request) {
	if tok := m.env("MLFLOW_TRACKING_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if u := m.env("MLFLOW_TRACKING_USERNAME"); u != "" {
		req.SetBasicAuth(u, m.env("MLFLOW_TRACKING_PASSWORD"))
	}
}

// mlflowName is name in the characters MLflow allows in metric, param
// and tag names.
func mlflowName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '@':
			b.WriteString("_at_")
		case r == '^':
			b.WriteString("_hat_")
		case r == '[':
			b.WriteByte('.')
		case r == ']':
		case r == '_' || r == '-' || r == '.' || r == '/' || r == ' ' || r == ':' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
