package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// artifactArg is a parsed REF:PATH argument.
type artifactArg struct {
	ref, path string
}

func (a artifactArg) String() string { return a.ref + ":" + a.path }

// parseArtifact parses a REF:PATH argument; a malformed one is a usage
// mistake.
func parseArtifact(s string) (artifactArg, error) {
	ref, path, err := artifacts.SplitArtifact(s)
	if err != nil {
		return artifactArg{}, asUsage(err)
	}
	return artifactArg{ref: ref, path: path}, nil
}

// parseObjectArtifact parses REF:PATH where PATH must name an object.
func parseObjectArtifact(s string) (artifactArg, error) {
	a, err := parseArtifact(s)
	if err != nil {
		return a, err
	}
	if err := artifacts.ValidatePath(a.path); err != nil {
		return a, usagef("%q: name an object as REF:PATH, e.g. main:data/prompts.parquet: %w", s, err)
	}
	return a, nil
}

// parseRef checks a ref expression argument.
func parseRef(s string) error {
	_, err := artifacts.ParseRef(s)
	return asUsage(err)
}

// parseMeta parses repeated --meta k=v flags into a map.
func parseMeta(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("invalid --meta %q: use KEY=VALUE", kv)
		}
		if _, dup := m[k]; dup {
			return nil, usagef("--meta %s given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

// parseDate parses --date: RFC 3339, or a Unix time in seconds.
func parseDate(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	return time.Time{}, usagef("invalid --date %q: use RFC 3339 (2025-01-02T15:04:05Z) or Unix seconds", s)
}
