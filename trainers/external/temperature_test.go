package external_test

import "testing"

// The reference script trains each row at its sampler column's
// temperature (none, or no temperature key: 1; greedy: 1) and refuses,
// as a data error naming the row (exit 65), a row it cannot score as
// sampled: top_p below 1, a column that is not JSON, a temperature that
// is not one.
func TestReferenceScriptTemperature(t *testing.T) {
	checkGRPOTrain(t, "temperature check", `
from grpo_train import sample_temperature, DataError
row = lambda sampler: {"prompt_id": "p", "sample_index": 3, "sampler": sampler}
for sampler, want in (
    (None, 1.0), ("", 1.0), ('{"n":8,"max_tokens":5}', 1.0), ('{"temperature":1,"top_p":0}', 1.0),
    ('{"temperature":1.2,"top_p":0,"max_tokens":5}', 1.2), ('{"temperature":0}', 1.0), ('{"temperature":0.7,"top_p":1}', 0.7),
):
    got = sample_temperature(row(sampler))
    assert got == want and isinstance(got, float), (sampler, got, want)
assert sample_temperature({"prompt_id": "p", "sample_index": 3}) == 1.0
for sampler, want in (
    ('{"temperature":1,"top_p":0.9}',
     "sample 3 of prompt 'p': sampler column: top_p 0.9 trains a policy rlpipe cannot score (the nucleus changes with every token); sample the train stage's rollouts without top_p (temperature alone is trained exactly)"),
    ("n=8", "sample 3 of prompt 'p': sampler column 'n=8' is not a JSON object of sampling parameters: Expecting value: line 1 column 1 (char 0)"),
    ("[1]", "sample 3 of prompt 'p': sampler column '[1]' is not a JSON object of sampling parameters"),
    ('{"temperature":-1}', "sample 3 of prompt 'p': sampler column: temperature -1 is not a temperature (a finite number >= 0)"),
):
    try:
        sample_temperature(row(sampler))
    except DataError as e:
        assert str(e) == want, str(e)
    else:
        raise AssertionError("accepted: " + sampler)
`)
}
