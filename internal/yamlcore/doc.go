// Package yamlcore reads numbers in the YAML a user writes — pipeline
// files, reward specs, the configs of verifiers and judges — by the YAML
// 1.2 core schema, on top of github.com/goccy/go-yaml.
//
// The YAML library follows the YAML 1.1 rule that a float has a dot, so
// it reads 1e-3, 1E-3 and +1e3 as strings, and 1.0e400 (out of range) as
// a string too. Every TRL and verl config writes learning rates as 1e-6;
// read as strings they fail a typed key ("expected a number") and, worse,
// reach an external trainer's hyperparameters as the JSON string "1e-6".
// Parse resolves the plain (unquoted, untagged) scalars the library left
// as strings and that the core schema calls floats:
//
//	[-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?   a float
//	[-+]? \. ( inf | Inf | INF )                                       an infinity
//
// into float nodes, so that every decoder after it (typed fields, free
// form maps, custom unmarshalers) sees a number. A quoted scalar ("1e-3")
// and one tagged !!str stay strings. Integers are read as the library
// reads them (0x1F, 0o17, 1_000, and 010 as octal; 09 is a string). An out-of-range float is
// ±Inf: the callers that want a number reject infinities and NaN, as no
// key of a config means one.
//
//	f, err := yamlcore.Parse(data)             // instead of parser.ParseBytes
//	err = yamlcore.Unmarshal(data, &v)         // instead of yaml.Unmarshal
//	err = yamlcore.Decode(ctx, node, &v)       // a node of a parsed file
//
// A resolved node remembers the text it was written as (Text), so that a
// key that takes a string (a stage's version, a verifier's stdin) can
// keep "1e3" rather than the float's "1000".
//
// It also holds what every reader of those files says about a place in
// one, so that a pipeline file, a reward spec and a verifier's keys
// report problems alike:
//
//	yamlcore.Where("pipeline.yaml", 12, 5)    // "pipeline.yaml:12:5", the start of each message
//	yamlcore.Position(node)                   // a node's line and column
//	yamlcore.Syntax(err)                      // a syntax error placed at the mistake
//	yamlcore.Suggest("retires", known)        // `did you mean "retries"?`
//
// Syntax moves two of the YAML library's positions: a key indented deeper
// than the key above it is reported on its own line (the library names
// the value on the line above), and an unclosed [ or { at its bracket.
package yamlcore
