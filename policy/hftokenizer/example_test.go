package hftokenizer_test

import (
	"fmt"

	"github.com/rlpipe/rlpipe/policy/hftokenizer"
)

// A byte-level vocabulary (GPT-2, Llama 3, Qwen) spelled token by token.
func ExampleParse() {
	tok, err := hftokenizer.Parse([]byte(`{"model":{"type":"BPE","vocab":{"Ġthe":0,"Ã¤":1,"Ã":2}},"decoder":{"type":"ByteLevel"}}`))
	if err != nil {
		panic(err)
	}
	for id := range int32(4) {
		fmt.Printf("%d %q\n", id, tok.TokenText(id))
	}
	// Output:
	// 0 " the"
	// 1 "ä"
	// 2 "\\xc3"
	// 3 "<id 3>"
}
