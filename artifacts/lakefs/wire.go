package lakefs

import (
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// The JSON bodies the store sends and reads are package lakefsapi's; this
// file turns them into the types of package artifacts.

func unixTime(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

func repositoryFromWire(r lakefsapi.Repository) artifacts.Repository {
	return artifacts.Repository{
		Name:             r.ID,
		DefaultBranch:    r.DefaultBranch,
		StorageNamespace: r.StorageNamespace,
		CreatedAt:        unixTime(r.CreationDate),
	}
}

func commitFromWire(c lakefsapi.Commit) artifacts.Commit {
	parents := c.Parents
	if parents == nil {
		parents = []string{}
	}
	var md map[string]string
	if len(c.Metadata) > 0 {
		md = c.Metadata
	}
	return artifacts.Commit{
		ID:           c.ID,
		Parents:      parents,
		Committer:    c.Committer,
		Message:      c.Message,
		CreationDate: unixTime(c.CreationDate),
		Metadata:     md,
		MetaRangeID:  c.MetaRangeID,
		Generation:   int(c.Generation),
	}
}

// metadataFromWire lower-cases keys: lakeFS stores what arrived as
// X-Lakefs-Meta-* headers, whose names HTTP canonicalises, and the
// contract's keys are lower-case ASCII.
func metadataFromWire(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		k = strings.ToLower(k)
		k = strings.TrimPrefix(k, metaHeaderPrefix)
		out[k] = v
	}
	return out
}

// objectInfoFromWire describes an object as the contract does: its
// checksum is the SHA-256 recorded under MetaSHA256 when it carries one,
// else lakeFS's own, and MetaSHA256 is not part of its metadata.
func objectInfoFromWire(o lakefsapi.ObjectStats) artifacts.ObjectInfo {
	var size int64
	if o.SizeBytes != nil {
		size = *o.SizeBytes
	}
	sum := o.Checksum
	if v := recordedSHA256(o); v != "" {
		sum = v
	}
	md := metadataFromWire(o.Metadata)
	if _, ok := md[MetaSHA256]; ok {
		// Dropped even when malformed: the key is never user metadata.
		delete(md, MetaSHA256)
		if len(md) == 0 {
			md = nil
		}
	}
	return artifacts.ObjectInfo{
		Path:        o.Path,
		Size:        size,
		Checksum:    sum,
		Mtime:       unixTime(o.Mtime),
		ContentType: o.ContentType,
		Metadata:    md,
	}
}

func entryFromWire(o lakefsapi.ObjectStats) artifacts.Entry {
	if o.PathType == lakefsapi.PathTypeCommonPrefix {
		return artifacts.Entry{ObjectInfo: artifacts.ObjectInfo{Path: o.Path}, CommonPrefix: true}
	}
	return artifacts.Entry{ObjectInfo: objectInfoFromWire(o)}
}

// changeFromWire maps a diff row; ok is false for rows that name no
// single object (common prefixes).
func changeFromWire(d lakefsapi.Diff) (artifacts.Change, bool) {
	if d.PathType == lakefsapi.PathTypeCommonPrefix || d.Type == "prefix_changed" {
		return artifacts.Change{}, false
	}
	ch := artifacts.Change{Path: d.Path}
	switch d.Type {
	case "added":
		ch.Type = artifacts.ChangeAdded
	case "removed":
		ch.Type = artifacts.ChangeRemoved
	default: // "changed", and "conflict" (changed on both sides)
		ch.Type = artifacts.ChangeModified
	}
	if d.SizeBytes != nil {
		ch.Size = *d.SizeBytes
	}
	return ch, true
}
