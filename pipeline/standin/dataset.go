package standin

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Prompts returns n arithmetic prompts ("i+i=", answer 2i) with ids
// p000, p001, …: the dataset the stand-in stages are tested and measured on.
func Prompts(n int) []tables.Prompt {
	rows := make([]tables.Prompt, n)
	for i := range rows {
		rows[i] = tables.Prompt{PromptID: fmt.Sprintf("p%03d", i), Prompt: fmt.Sprintf("%d+%d=", i, i), Answer: strconv.Itoa(2 * i), Metadata: "{}", Source: "standin", Split: "train"}
	}
	return rows
}

// PutDataset writes Prompts(n) as a prompts table at branch:path and
// commits it.
func PutDataset(ctx context.Context, st artifacts.Store, branch, path string, n int) error {
	var buf bytes.Buffer
	if err := tables.Write(&buf, tables.Prompts, Prompts(n), nil); err != nil {
		return err
	}
	if _, err := st.PutObject(ctx, branch, path, &buf, nil); err != nil {
		return err
	}
	_, err := st.Commit(ctx, branch, "stand-in dataset", nil)
	return err
}
