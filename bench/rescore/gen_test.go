package rescore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// samplesPerPrompt is the group size: each prompt is answered this many
// times.
const samplesPerPrompt = 8

// dataset is one generated data set: the same rows as Parquet tables and
// as JSON lines.
type dataset struct {
	dir                string
	rows, prompts      int
	trajectories       string // trajectories table, Parquet
	promptsTable       string // prompts table, Parquet
	trajectoriesJSONL  string
	promptsJSONL       string
	promptIndex        map[string]int // prompt_id → prompt number
	kinds              [numKinds]int  // rows by answer layout
	completionBytes    int64
	trajectoriesParqMB float64
}

// Answer layouts a completion ends with. Each is one that rlpipe's
// extract_answer, the SQL regular expressions and the Python function
// read the same way: no empty \boxed{}, no nested braces, no signs, no
// text after the number on a "####" line, commas only as thousands
// separators.
const (
	kindHash       = iota // "\n#### A"
	kindBoxed             // "… is $\boxed{A}$."
	kindBoxedAfter        // "… $\boxed{A}$. Check: 3 + 4 = 7." (numbers after the box)
	kindHashAfter         // "\n#### A\nThat took 6 steps." (numbers after the line)
	kindBoth              // "\n#### B\n… \boxed{A}": the box wins
	kindLastNumber        // "… The answer is A.": neither marker
	numKinds
)

var kindNames = [numKinds]string{"####", `\boxed{}`, `\boxed{} then numbers`, "#### then numbers", `#### and \boxed{}`, "last number"}

var words = strings.Fields(`the a of to and is are we each per total so then
	apples books cost costs price dollars hours minutes miles week day days
	left after before more less than twice half times sum difference
	buys sells has had gives takes needs makes eats reads runs pays
	friends students boxes bags cars trees pages cookies marbles tickets
	first second third remaining altogether how many much if she he they
	it that this which with from for in on at by`)

// gen draws the data set's rows from one seeded stream, so the same
// seed and row count give the same files.
type gen struct {
	r  *rand.Rand
	sb strings.Builder
}

// answer is prompt p's reference answer, as the prompts table holds it.
func (g *gen) answer() string {
	switch k := g.r.IntN(10); {
	case k < 7:
		return strconv.Itoa(g.r.IntN(1000))
	case k < 9:
		return strconv.Itoa(1000 + g.r.IntN(999000))
	default:
		// Quarters are exact in binary: every parser gets the same value.
		return strconv.Itoa(g.r.IntN(500)) + [...]string{".25", ".5", ".75"}[g.r.IntN(3)]
	}
}

// withCommas writes the integer part of a decimal number in groups of
// three: 1234567.5 → 1,234,567.5.
func withCommas(s string) string {
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

// number is a number written in the prose: plain, with thousands
// separators or with a decimal part.
func (g *gen) number() string {
	switch k := g.r.IntN(10); {
	case k < 6:
		return strconv.Itoa(g.r.IntN(100))
	case k < 8:
		return withCommas(strconv.Itoa(1000 + g.r.IntN(99000)))
	case k < 9:
		return strconv.Itoa(1000 + g.r.IntN(9000))
	default:
		return strconv.Itoa(g.r.IntN(100)) + "." + strconv.Itoa(1+g.r.IntN(99))
	}
}

// shown is how a completion writes an answer: right or wrong, with or
// without thousands separators.
func (g *gen) shown(answer string) string {
	a := answer
	if g.r.IntN(100) >= 55 { // wrong
		if g.r.IntN(2) == 0 {
			v, _ := strconv.ParseFloat(answer, 64)
			a = strconv.FormatFloat(v+float64(1+g.r.IntN(9)), 'f', -1, 64)
		} else {
			a = strconv.Itoa(g.r.IntN(2000))
		}
	}
	if g.r.IntN(2) == 0 {
		a = withCommas(a)
	}
	return a
}

// completion is a ~600-character solution ending in an answer laid out
// as kind says.
func (g *gen) completion(answer string, kind int) string {
	sb := &g.sb
	sb.Reset()
	target := 520 + g.r.IntN(80)
	sinceStop := 0
	for sb.Len() < target {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		if g.r.IntN(9) == 0 {
			sb.WriteString(g.number())
		} else {
			sb.WriteString(words[g.r.IntN(len(words))])
		}
		if sinceStop++; sinceStop > 8 && g.r.IntN(4) == 0 {
			sb.WriteByte('.')
			sinceStop = 0
		}
	}
	a := g.shown(answer)
	switch kind {
	case kindHash:
		sb.WriteString("\n#### " + a)
	case kindBoxed:
		sb.WriteString(` So the answer is $\boxed{` + a + `}$.`)
	case kindBoxedAfter:
		sb.WriteString(` So the answer is $\boxed{` + a + `}$. Check: ` + g.number() + " + " + g.number() + " = " + g.number() + ".")
	case kindHashAfter:
		sb.WriteString("\n#### " + a + "\nThat took " + g.number() + " steps.")
	case kindBoth:
		sb.WriteString("\n#### " + g.shown(answer) + "\nOn reflection the answer is \\boxed{" + a + "}")
	case kindLastNumber:
		sb.WriteString(" The answer is " + a + ".")
	}
	return sb.String()
}

func (g *gen) kind() int {
	switch k := g.r.IntN(100); {
	case k < 35:
		return kindHash
	case k < 65:
		return kindBoxed
	case k < 75:
		return kindBoxedAfter
	case k < 83:
		return kindHashAfter
	case k < 88:
		return kindBoth
	default:
		return kindLastNumber
	}
}

// trajectoryJSON is a trajectory as a JSON line: the table's scalar
// columns, as a dataset of rollouts would hold them.
type trajectoryJSON struct {
	PromptID      string  `json:"prompt_id"`
	SampleIndex   int32   `json:"sample_index"`
	GroupID       string  `json:"group_id"`
	Completion    string  `json:"completion"`
	FinishReason  string  `json:"finish_reason"`
	NumTokens     int32   `json:"num_tokens"`
	PolicyVersion string  `json:"policy_version"`
	Sampler       string  `json:"sampler"`
	Seed          int64   `json:"seed"`
	Staleness     int32   `json:"staleness"`
	Status        string  `json:"status"`
	Error         *string `json:"error"`
}

type promptJSON struct {
	PromptID string `json:"prompt_id"`
	Prompt   string `json:"prompt"`
	Answer   string `json:"answer"`
}

// generate writes n rollouts (⌈n/8⌉ prompts) into dir from a fixed seed.
func generate(tb testing.TB, dir string, n int) *dataset {
	tb.Helper()
	d := &dataset{
		dir:               dir,
		rows:              n,
		prompts:           (n + samplesPerPrompt - 1) / samplesPerPrompt,
		trajectories:      filepath.Join(dir, "trajectories.parquet"),
		promptsTable:      filepath.Join(dir, "prompts.parquet"),
		trajectoriesJSONL: filepath.Join(dir, "trajectories.jsonl"),
		promptsJSONL:      filepath.Join(dir, "prompts.jsonl"),
	}
	g := &gen{r: rand.New(rand.NewPCG(20260101, 8))}

	prompts := make([]tables.Prompt, d.prompts)
	d.promptIndex = make(map[string]int, d.prompts)
	for p := range prompts {
		id := fmt.Sprintf("gsm8k-train-%06d", p)
		prompts[p] = tables.Prompt{PromptID: id, Prompt: "Problem " + strconv.Itoa(p) + ": how many are left?",
			Answer: g.answer(), Source: "generated", Split: "train"}
		d.promptIndex[id] = p
	}
	writeFile(tb, d.promptsTable, func(w *bufio.Writer) error {
		return tables.Write(w, tables.Prompts, prompts, nil)
	})
	writeFile(tb, d.promptsJSONL, func(w *bufio.Writer) error {
		enc := json.NewEncoder(w)
		for _, p := range prompts {
			if err := enc.Encode(promptJSON{p.PromptID, p.Prompt, p.Answer}); err != nil {
				return err
			}
		}
		return nil
	})

	// The JSON lines are written by a second goroutine from the same
	// batches while this one writes the Parquet file.
	batches := make(chan []tables.Trajectory, 4)
	jsonDone := make(chan error, 1)
	go func() {
		jsonDone <- writeJSONL(d.trajectoriesJSONL, batches)
	}()
	writeFile(tb, d.trajectories, func(w *bufio.Writer) error {
		defer close(batches)
		tw, err := tables.NewWriter(w, tables.Trajectories, nil)
		if err != nil {
			return err
		}
		const batchRows = 4096
		batch := make([]tables.Trajectory, 0, batchRows)
		flush := func() error {
			if err := tw.Write(batch...); err != nil {
				return err
			}
			batches <- batch
			batch = make([]tables.Trajectory, 0, batchRows)
			return nil
		}
		for i := 0; i < n; i++ {
			p := i / samplesPerPrompt
			pid := prompts[p].PromptID
			kind := g.kind()
			d.kinds[kind]++
			t := tables.Trajectory{
				PromptID:      pid,
				SampleIndex:   int32(i % samplesPerPrompt),
				GroupID:       "it0/" + pid,
				Completion:    g.completion(prompts[p].Answer, kind),
				FinishReason:  "stop",
				NumTokens:     int32(100 + g.r.IntN(121)),
				PolicyVersion: "qwen2.5-0.5b+sha256:4f2a",
				Sampler:       `{"temperature":1,"top_p":1,"max_tokens":1024}`,
				Seed:          int64(i),
				Status:        tables.StatusOK,
			}
			if g.r.IntN(100) == 0 {
				msg := "deadline exceeded"
				t.Status, t.Error = tables.StatusTimeout, &msg
			}
			d.completionBytes += int64(len(t.Completion))
			if batch = append(batch, t); len(batch) == batchRows {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		return tw.Close()
	})
	if err := <-jsonDone; err != nil {
		tb.Fatal(err)
	}
	if st, err := os.Stat(d.trajectories); err == nil {
		d.trajectoriesParqMB = float64(st.Size()) / (1 << 20)
	}
	return d
}

// writeJSONL writes the trajectories of every batch received as JSON
// lines, and drains the channel even after a failure.
func writeJSONL(path string, batches <-chan []tables.Trajectory) (err error) {
	defer func() {
		for range batches {
		}
	}()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for batch := range batches {
		for _, t := range batch {
			if err := enc.Encode(trajectoryJSON{t.PromptID, t.SampleIndex, t.GroupID, t.Completion, t.FinishReason,
				t.NumTokens, t.PolicyVersion, t.Sampler, t.Seed, t.Staleness, t.Status, t.Error}); err != nil {
				return fmt.Errorf("write %s: %w", filepath.Base(path), err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// writeFile creates path and writes it through a buffer with fill.
func writeFile(tb testing.TB, path string, fill func(*bufio.Writer) error) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := fill(w); err != nil {
		tb.Fatalf("write %s: %v", filepath.Base(path), err)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}
