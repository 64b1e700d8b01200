package lakefsapi

// MetaSHA256 is the user-metadata key under which rlpipe's client records
// the SHA-256 hex of an object it uploads (exported as lakefs.MetaSHA256,
// which documents it). Objects carry user metadata in lakeFS's
// ObjectStats without the X-Lakefs-Meta- prefix of the upload header.
const MetaSHA256 = "rlpipe-sha256"
