package cli

import (
	"bytes"
	"math"
	"testing"
)

// A value JSON cannot hold fails the output with an error that says what
// happened, and nothing half-written reaches the reader.
func TestPrinterJSONNotANumber(t *testing.T) {
	var out bytes.Buffer
	err := printer{w: &out, json: true}.JSON(map[string]float64{"kl": math.NaN()})
	want := "print the JSON output: json: unsupported value: NaN (rlpipe should write a value that is not a number as null: please report this)"
	if err == nil || err.Error() != want || out.Len() != 0 {
		t.Fatalf("err %v, output %q; want %q and no output", err, out.String(), want)
	}
}
