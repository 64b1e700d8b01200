package tiny

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	"github.com/rlpipe/rlpipe/policy"
)

// A prompt sent as token ids samples exactly what the same prompt sent as
// text does, and a token id the model cannot read in a prompt (PAD, BOS,
// past the vocabulary) gives env_error samples naming it.
func TestPromptTokenIDs(t *testing.T) {
	m := testModel(t)
	ctx := context.Background()
	s := policy.Sampling{N: 2, Temperature: 1, MaxTokens: 6, Logprobs: true, PromptLogprobs: true}
	ids, err := m.Tokenize("12+3=")
	if err != nil {
		t.Fatal(err)
	}
	last := int32(m.cfg.VocabSize() - 1)
	for _, c := range []struct {
		name string
		ids  []int32
		want string // the error of the samples; "" for the text prompt's samples
	}{
		{name: "the text's ids", ids: ids},
		{name: "pad", ids: []int32{ids[0], PAD}, want: `request "r": prompt token id 0 at position 2: not in the vocabulary (EOS 2, or 3..` + itoa(last) + `)`},
		{name: "bos", ids: []int32{BOS, ids[0]}, want: `request "r": prompt token id 1 at position 1: not in the vocabulary (EOS 2, or 3..` + itoa(last) + `)`},
		{name: "past the vocabulary", ids: []int32{last + 1}, want: `request "r": prompt token id ` + itoa(last+1) + ` at position 1: not in the vocabulary (EOS 2, or 3..` + itoa(last) + `)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := m.Generate(ctx, nil, []policy.Request{
				{ID: "r", Prompt: "12+3=", Seed: 5}, {ID: "r", PromptTokenIDs: c.ids, Seed: 5}}, s)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if !reflect.DeepEqual(out[0], out[1]) {
					t.Errorf("token ids sampled %+v\ntext sampled %+v", out[1], out[0])
				}
				return
			}
			for _, smp := range out[1] {
				if smp.Status != policy.StatusInvalid || smp.Error != c.want {
					t.Errorf("sample %d: %s %q, want %s %q", smp.Index, smp.Status, smp.Error, policy.StatusInvalid, c.want)
				}
			}
		})
	}
}

// Suffix renders what PromptTokens renders past an episode's tokens: the
// first turn's messages; after a reply that ended with EOS, the next
// observation; after one cut short, EOS first.
func TestSuffix(t *testing.T) {
	m := testModel(t)
	tok := func(s string) []int32 {
		ids, err := m.Tokenize(s)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	first := []policy.Message{{Role: "user", Content: "1+2="}}
	for _, c := range []struct {
		name  string
		reply []int32
		msgs  []policy.Message
		want  []int32
	}{
		{name: "first turn", msgs: first, want: tok("1+2=")},
		{name: "after a reply with EOS", reply: append(tok("3"), EOS), msgs: []policy.Message{{Role: "user", Content: "3+4="}}, want: tok("3+4=")},
		{name: "after a reply cut short", reply: tok("3"), msgs: []policy.Message{{Role: "user", Content: "3+4="}}, want: append([]int32{EOS}, tok("3+4=")...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := m.Suffix(context.Background(), first, c.reply, c.msgs, nil)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Suffix = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	_, err := m.Suffix(context.Background(), nil, nil, []policy.Message{{Role: "user", Content: "1+x="}}, nil)
	if want := `message 1 (user): character 'x' at column 3: not in the vocabulary "0123456789+-="`; err == nil || err.Error() != want {
		t.Errorf("Suffix of an unknown character = %v, want %s", err, want)
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
