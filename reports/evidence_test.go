package reports

import (
	"encoding/json"
	"math"
	"testing"
)

// An alarm's figure that is not a number reaches `report -o json` as
// null, not as an encode error that loses the whole output; null reads
// back as NaN.
func TestEvidenceJSON(t *testing.T) {
	a := Alarm{Rule: RuleLengthDriftUp, Iteration: 6, LastIteration: 7, Message: "m",
		Evidence: []Evidence{{"ratio", 1.5}, {"frac_finish_length", math.NaN()}, {"entropy_ratio", math.Inf(1)}}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rule":"length-drift-up","iteration":6,"last_iteration":7,"message":"m","evidence":[{"name":"ratio","value":1.5},{"name":"frac_finish_length","value":null},{"name":"entropy_ratio","value":null}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back Alarm
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if ev := back.Evidence; len(ev) != 3 || ev[0] != (Evidence{"ratio", 1.5}) || ev[1].Name != "frac_finish_length" || !math.IsNaN(ev[1].Value) || !math.IsNaN(ev[2].Value) {
		t.Errorf("read back %+v, want ratio 1.5 and two NaN", ev)
	}
}
