package rewards

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// rescoreSpec is bench/rescore/reward.yaml: the reward the rescoring
// comparison computes.
const rescoreSpec = `
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer, 1e-6) ? 1.0 : 0.0'
    weight: 1.0
  - name: format
    expr: 'completion.contains("####") || completion.contains("\\boxed{") ? 1.0 : 0.0'
    weight: 0.2
  - name: length
    expr: 'num_tokens > 150 ? -0.001 * double(num_tokens - 150) : 0.0'
    weight: 1.0
`

// mixedSpec reads most variables, fails on some rows (a missing prompt,
// an infinite value), and has a total expression.
const mixedSpec = `
statuses: [ok, truncated]
components:
  - name: correct
    expr: 'num_equal(extract_answer(completion), answer) ? 1.0 : 0.0'
  - name: boxed
    expr: 'extract_boxed(completion) != "" && completion.contains("\\boxed") ? 1.0 : 0.0'
  - name: hard
    expr: 'metadata.level == 2 && prompt.contains("+") ? 1.0 : 0.0'
  - name: ratio
    expr: '1.0 / double(sample_index)'
  - name: misc
    expr: 'size(turns) + (finish_reason == "stop" ? 1 : 0) + (prompt_id.startsWith("p1") ? 1 : 0) + num_tokens % 7'
total: 'correct * (1.0 + boxed) - 0.5 * hard + misc'
`

// TestRewardsFilePinned pins the bytes of the rewards files ScoreFile
// writes for fixed inputs and specs, whatever the concurrency, so that
// changes made for speed cannot change what is written. The inputs'
// digests are pinned too, to tell a change of the trajectories writer
// (artifacts/tables) from a change of scoring.
func TestRewardsFilePinned(t *testing.T) {
	dir := t.TempDir()
	synthPath := filepath.Join(dir, "synth.parquet")
	synthPrompts := writeSynthWith(t, synthPath, 30_000, &tables.WriteOptions{RowGroupRows: 7_000})
	synth, err := os.ReadFile(synthPath)
	if err != nil {
		t.Fatal(err)
	}
	mixedRows, mixedPrompts := testRows(2_000)
	mixedRows[5].PromptID = "nowhere"
	mixedRows[9].Status = tables.StatusTruncated
	mixed := trajectoriesRG(t, mixedRows, 300)

	cases := []struct {
		name    string
		spec    string
		in      []byte
		prompts []tables.Prompt
		opts    ScoreOptions
		input   string // sha256 of in
		want    string // sha256 of the rewards file
		rows    string // sha256 of its rows as read back (rowsDigest)
		summary string // sha256 of the Summary printed with %+v
	}{
		{name: "rescore", spec: rescoreSpec, in: synth, prompts: synthPrompts,
			input:   "0ec5d14e09ccbcaba75b51b24c92018b5caf7b8483ade84d9e838618e50dcdbd",
			want:    "52be050f927fe26d9207ee3293c82e00a908e65ff0a5ae5a1de9f5569276dfa1",
			rows:    "27068870b65a728fc9560686bef402a73704c2036fcefa2c2e96a672ccfca0b7",
			summary: "d02f4dd50d76c2ebc1f27a831a65a46c56b4f22fdb215aededc2d7933bee1601"},
		{name: "rescore small batches", spec: rescoreSpec, in: synth, prompts: synthPrompts,
			opts:    ScoreOptions{BatchRows: 1000, Write: &tables.WriteOptions{RowGroupRows: 5_000}},
			input:   "0ec5d14e09ccbcaba75b51b24c92018b5caf7b8483ade84d9e838618e50dcdbd",
			want:    "421964fe2b2581d11ba9f1d6a72e017aac493a522cc584a65818b47e2acaf628",
			rows:    "27068870b65a728fc9560686bef402a73704c2036fcefa2c2e96a672ccfca0b7",
			summary: "d02f4dd50d76c2ebc1f27a831a65a46c56b4f22fdb215aededc2d7933bee1601"},
		{name: "rescore limit", spec: rescoreSpec, in: synth, prompts: synthPrompts,
			opts:    ScoreOptions{Limit: 12_345},
			input:   "0ec5d14e09ccbcaba75b51b24c92018b5caf7b8483ade84d9e838618e50dcdbd",
			want:    "37adcd1da4c133d5d36c5ca899c9e7f240bc13bffcd4dda68bc6206de5eb8378",
			rows:    "6adbf88f9e54e5e40fc379cca8ffedb14ebda4d9eafc82c8bb07bdf7f5cefc5e",
			summary: "989737a67fda4551513e52de5b1e5758f2aa33528e4a1465f6c8ee190adea9d4"},
		{name: "mixed", spec: mixedSpec, in: mixed, prompts: mixedPrompts,
			input:   "cfb997ccaacfb62c317f39d6d1028bdfef7da8d3cf4badc5ad1261db238f0745",
			want:    "c9926bbc56521d5e1081c125260f418f81cfbbe61b0d2e4b758a264c1adadfa3",
			rows:    "8ac0dfeab76c6d9d22b4f3b4fbc45563259f6e26ac3f165bf96cded450cbb963",
			summary: "231e168fdacaa61aed0f40568c9911a2b32400e2ad00bbbd7744f8e93af629d5"},
		{name: "gsm8k", spec: gsm8k, in: mixed, prompts: mixedPrompts,
			input:   "cfb997ccaacfb62c317f39d6d1028bdfef7da8d3cf4badc5ad1261db238f0745",
			want:    "759f6d78080c0a51e6b16dadc1c750afcdc88afbf404c1e8289a30d79c4f4abd",
			rows:    "67a76eeebe6893e03a52ac89064b9e606343324280d3ca89f8c9f2063d043056",
			summary: "6a5f8bfe9cb90bb312cef9a3c20a362c263c5a7285129dd2b8188f82ac79f74b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := digest(c.in); got != c.input {
				t.Errorf("input digest %s, want %s: the trajectories writer changed, not scoring", got, c.input)
			}
			idx, err := NewPrompts(c.prompts)
			if err != nil {
				t.Fatal(err)
			}
			p := mustCompile(t, c.spec)
			for _, conc := range []int{1, 2, 5} {
				o := c.opts
				o.Prompts, o.Concurrency = idx, conc
				var out bytes.Buffer
				sum, err := p.ScoreFile(context.Background(), &out, bytes.NewReader(c.in), int64(len(c.in)), &o)
				if err != nil {
					t.Fatal(err)
				}
				if conc == 1 {
					t.Logf("%d rows: %d scored, %d skipped, %d errors", sum.Rows, sum.Scored, sum.Skipped, sum.Errors)
				}
				// The summary too, its sums to the last bit (fmt sorts map keys).
				if got := digest([]byte(fmt.Sprintf("%+v", sum))); got != c.summary {
					t.Errorf("concurrency %d: summary digest %s, want %s: %+v", conc, got, c.summary, sum)
				}
				if got := digest(out.Bytes()); got != c.want {
					t.Errorf("concurrency %d: rewards file digest %s, want %s", conc, got, c.want)
				}
				if got := rowsDigest(t, out.Bytes()); got != c.rows {
					t.Errorf("concurrency %d: rewards rows digest %s, want %s", conc, got, c.rows)
				}
			}
		})
	}
}

// rowsDigest is the digest of a rewards file's rows as read back, floats
// to the bit: what the file says, whatever its encoding. (A change of
// the encoding changes the file's digest, never this one.)
func rowsDigest(t *testing.T, file []byte) string {
	t.Helper()
	rows, err := tables.Read(bytes.NewReader(file), int64(len(file)), "rewards", tables.Rewards)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, r := range rows {
		fmt.Fprintf(h, "%q %d %x %q %q %q %q", r.PromptID, r.SampleIndex, math.Float64bits(r.Total), r.SpecDigest,
			r.VerifierOutputs, r.JudgeOutputs, r.Status)
		if r.Error != nil {
			fmt.Fprintf(h, " error %q", *r.Error)
		}
		names := slices.Sorted(maps.Keys(r.Components))
		for _, n := range names {
			fmt.Fprintf(h, " %s=%x", n, math.Float64bits(r.Components[n]))
		}
		fmt.Fprintln(h)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
