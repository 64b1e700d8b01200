// Package lakefsapi holds the JSON bodies of lakeFS's REST API (v1) that
// rlpipe's client (package lakefs) and server (package storeserver) speak,
// named and shaped as the schemas of lakeFS's OpenAPI document
// (lakefs-swagger.yml): Ref is the schema Ref, BranchCreation the schema
// BranchCreation, and so on. Times are Unix seconds on the wire.
//
// Each body has one side that writes it, and its omitempty tags are that
// side's: request bodies (the *Creation types, Merge, RevertCreation)
// are written by the client, which leaves out optional fields it does not
// set, as lakeFS's own clients do; answers (Repository, Ref, Commit,
// ObjectStats, Diff, Page, ...) are written by the server, which sends
// every field lakeFS always sends. Decoding ignores omitempty, so both
// sides read every body alike.
//
// The package has types only, and MetaSHA256, the one metadata key both
// sides know (the client records an object's SHA-256 under it; the server
// decides whether to store it, see storeserver.Faults). Converting to and from the types of
// package artifacts is each side's business: the client lower-cases
// metadata keys that HTTP canonicalised, the server always sends a
// commit's metadata object.
package lakefsapi
