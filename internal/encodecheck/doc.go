// Package encodecheck holds a test, and nothing else, that reads the
// module's non-test Go files and fails on a dropped encode error: a
// json.Marshal or json.MarshalIndent whose error result is assigned to _,
// or an Encode call (a json.Encoder's, or any encoder's) whose result is
// discarded. JSON has no NaN or infinity, so a float that is not finite
// makes these fail, and a dropped error then writes an empty or missing
// file that the next reader chokes on far from the cause.
//
// Its debt table lists the places still doing it, by file and count; the
// test fails on a new one and on a listed one that is gone, so the table
// is always the remaining list. `make lint` runs it.
package encodecheck
