package embedded

import (
	"strings"
	"testing"
)

// Load opens each shipped model by name ("" is tiny-arith); another name
// that is no file is an error naming it.
func TestLoadShipped(t *testing.T) {
	for _, c := range []struct{ model, version string }{
		{"", "tiny-arith@"},
		{ModelTinyArith, "tiny-arith@"},
		{"tiny-chain", "tiny-chain@"},
		{"tiny-rg", "tiny-rg@"},
		{"tiny-tool", "tiny-tool@"},
	} {
		t.Run(c.model, func(t *testing.T) {
			m, err := Load(c.model)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(m.Version(), c.version) || (c.model != "" && !Shipped(c.model)) {
				t.Errorf("Load(%q): version %s, Shipped %v", c.model, m.Version(), Shipped(c.model))
			}
		})
	}
	if Shipped("tiny-gsm8k") {
		t.Error(`Shipped("tiny-gsm8k") is true`)
	}
	if _, err := Load("tiny-gsm8k"); err == nil || err.Error() != "policy: load tiny-gsm8k: load tiny model: read safetensors: open tiny-gsm8k: no such file or directory" {
		t.Errorf("Load of an unknown name: %v", err)
	}
}
