package rewards_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rlpipe/rlpipe/artifacts/tables"
	"github.com/rlpipe/rlpipe/rewards"
)

// A row's dataset columns: what a Python function receives as
// **columns, a verifier template's .Row (this JSON) and CEL's row.
func ExampleRow_Columns() {
	row := rewards.Row{
		Trajectory: tables.Trajectory{PromptID: "cd-0", SampleIndex: 1, Completion: "83 + 94 - 8", FinishReason: "stop", NumTokens: 9, Status: tables.StatusOK},
		Prompt:     tables.Prompt{PromptID: "cd-0", Answer: "83 + 94 - 8", Metadata: `{"numbers": [83, 94, 8], "target": 169}`, Source: "reasoning_gym:countdown", Split: "train"},
		HasPrompt:  true,
	}
	b, _ := json.Marshal(row.Columns())
	fmt.Println(string(b))

	spec, _ := rewards.ParseSpec("reward.yaml", []byte(`components:
  - name: target
    expr: row.metadata.target
`))
	prog, _ := rewards.Compile(spec)
	r, _ := prog.Score(context.Background(), row, nil)
	fmt.Println(r.Components["target"])
	// Output:
	// {"answer":"83 + 94 - 8","finish_reason":"stop","metadata":{"numbers":[83,94,8],"target":169},"num_tokens":9,"prompt_id":"cd-0","sample_index":1,"source":"reasoning_gym:countdown","split":"train","status":"ok"}
	// 169
}
