// Package encodecheck holds a test, and nothing else, that reads the
// module's non-test Go files and fails on a dropped encode error: a
// json.Marshal or json.MarshalIndent whose error result is assigned to _,
// or an Encode call (a json.Encoder's, or any encoder's) whose result is
// discarded. JSON has no NaN or infinity, so a float that is not finite
// makes these fail, and a dropped error then writes an empty or missing
// file that the next reader chokes on far from the cause.
//
// Its debt table lists the places still allowed to do it, by file and
// count, and is empty: the test fails on any drop, naming its file:line,
// and on a listed one that is gone. `make lint` runs it.
package encodecheck
