package cli

import (
	"path"
	"strings"
)

// File formats import and export know.
const (
	formatRaw     = ""
	formatJSONL   = "jsonl"
	formatCSV     = "csv"
	formatParquet = "parquet"
)

// parseFormat checks a --format value.
func parseFormat(s, verb string) (string, error) {
	switch f := strings.ToLower(s); f {
	case formatRaw, formatJSONL, formatCSV, formatParquet:
		return f, nil
	case "ndjson":
		return formatJSONL, nil
	}
	return "", usagef("%s: invalid --format %q: use jsonl, csv or parquet", verb, s)
}

// formatOf guesses a file's format from its extension; formatRaw for
// anything that is not a dataset.
func formatOf(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".jsonl", ".ndjson":
		return formatJSONL
	case ".csv":
		return formatCSV
	case ".parquet":
		return formatParquet
	}
	return formatRaw
}

// isParquet reports whether an object path names a Parquet file.
func isParquet(p string) bool { return formatOf(p) == formatParquet }
