package tables

import (
	"bytes"
	"context"
	"testing"
)

// FuzzReadParquet feeds arbitrary bytes to the readers: they must return
// an error or rows, never panic or hang.
func FuzzReadParquet(f *testing.F) {
	valid := fuzzSeed(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		if rd, err := NewReader(bytes.NewReader(data), int64(len(data)), "fuzz", Trajectories, &ReadOptions{BatchRows: 3}); err == nil {
			for _, err := range rd.Rows(ctx) {
				if err != nil {
					break
				}
			}
		}
		if f, err := OpenFile(bytes.NewReader(data), int64(len(data)), "fuzz", nil); err == nil {
			for _, err := range f.Rows(ctx) {
				if err != nil {
					break
				}
			}
		}
	})
}

func fuzzSeed(tb testing.TB) []byte {
	var buf bytes.Buffer
	err := Write(&buf, Trajectories, []Trajectory{
		{PromptID: "p", SampleIndex: 1, Completion: "abc", Turns: []Turn{{Role: "user", Content: "q", ToolCalls: ptr("[]")}},
			TokenIDs: []int32{1, 2}, Logprobs: []float32{-1}, Status: StatusOK},
		{PromptID: "q", Status: StatusTimeout, Error: ptr("slow")},
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
