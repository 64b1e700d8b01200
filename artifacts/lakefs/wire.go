package lakefs

import (
	"strings"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Wire types: the JSON bodies of the lakeFS API (v1) that the store sends
// and reads, named and shaped as in the OpenAPI document. Times are Unix
// seconds on the wire.

type wireRepository struct {
	ID               string `json:"id"`
	CreationDate     int64  `json:"creation_date"`
	DefaultBranch    string `json:"default_branch"`
	StorageNamespace string `json:"storage_namespace"`
	ReadOnly         bool   `json:"read_only,omitempty"`
}

type wireRepositoryCreation struct {
	Name             string `json:"name"`
	StorageNamespace string `json:"storage_namespace"`
	DefaultBranch    string `json:"default_branch,omitempty"`
}

// wireRef is the spec's Ref: a branch or a tag.
type wireRef struct {
	ID       string `json:"id"`
	CommitID string `json:"commit_id"`
}

type wireBranchCreation struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

type wireTagCreation struct {
	ID  string `json:"id"`
	Ref string `json:"ref"`
}

type wireResetCreation struct {
	Type string `json:"type"` // "reset", "common_prefix" or "object"
	Path string `json:"path,omitempty"`
}

type wireCommit struct {
	ID           string            `json:"id"`
	Parents      []string          `json:"parents"`
	Committer    string            `json:"committer"`
	Message      string            `json:"message"`
	CreationDate int64             `json:"creation_date"`
	MetaRangeID  string            `json:"meta_range_id"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Generation   int64             `json:"generation,omitempty"`
}

type wireCommitCreation struct {
	Message    string            `json:"message"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Date       *int64            `json:"date,omitempty"`
	AllowEmpty bool              `json:"allow_empty,omitempty"`
}

type wireMerge struct {
	Message    string            `json:"message,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Strategy   string            `json:"strategy,omitempty"`
	AllowEmpty bool              `json:"allow_empty,omitempty"`
}

type wireMergeResult struct {
	Reference string `json:"reference"`
}

type wireFindMergeBaseResult struct {
	SourceCommitID      string `json:"source_commit_id"`
	DestinationCommitID string `json:"destination_commit_id"`
	BaseCommitID        string `json:"base_commit_id"`
}

type wireCommitOverrides struct {
	Message  string            `json:"message,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

type wireRevertCreation struct {
	Ref             string               `json:"ref"`
	ParentNumber    int                  `json:"parent_number"`
	CommitOverrides *wireCommitOverrides `json:"commit_overrides,omitempty"`
	AllowEmpty      bool                 `json:"allow_empty,omitempty"`
}

// Path types in listings and diffs.
const (
	pathTypeObject       = "object"
	pathTypeCommonPrefix = "common_prefix"
)

type wireObjectStats struct {
	Path            string            `json:"path"`
	PathType        string            `json:"path_type"`
	PhysicalAddress string            `json:"physical_address"`
	Checksum        string            `json:"checksum"`
	SizeBytes       *int64            `json:"size_bytes"`
	Mtime           int64             `json:"mtime"`
	Metadata        map[string]string `json:"metadata"`
	ContentType     string            `json:"content_type"`
}

type wireDiff struct {
	Type      string `json:"type"` // added, removed, changed, conflict, prefix_changed
	Path      string `json:"path"`
	PathType  string `json:"path_type"`
	SizeBytes *int64 `json:"size_bytes"`
}

func unixTime(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

func (r wireRepository) toRepository() artifacts.Repository {
	return artifacts.Repository{
		Name:             r.ID,
		DefaultBranch:    r.DefaultBranch,
		StorageNamespace: r.StorageNamespace,
		CreatedAt:        unixTime(r.CreationDate),
	}
}

func (c wireCommit) toCommit() artifacts.Commit {
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

func (o wireObjectStats) toObjectInfo() artifacts.ObjectInfo {
	var size int64
	if o.SizeBytes != nil {
		size = *o.SizeBytes
	}
	return artifacts.ObjectInfo{
		Path:        o.Path,
		Size:        size,
		Checksum:    o.Checksum,
		Mtime:       unixTime(o.Mtime),
		ContentType: o.ContentType,
		Metadata:    metadataFromWire(o.Metadata),
	}
}

func (o wireObjectStats) toEntry() artifacts.Entry {
	if o.PathType == pathTypeCommonPrefix {
		return artifacts.Entry{ObjectInfo: artifacts.ObjectInfo{Path: o.Path}, CommonPrefix: true}
	}
	return artifacts.Entry{ObjectInfo: o.toObjectInfo()}
}

// toChange maps a diff row; ok is false for rows that name no single
// object (common prefixes).
func (d wireDiff) toChange() (artifacts.Change, bool) {
	if d.PathType == pathTypeCommonPrefix || d.Type == "prefix_changed" {
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

// wireObjectCopy is ObjectCopyCreation.
type wireObjectCopy struct {
	SrcPath string `json:"src_path"`
	SrcRef  string `json:"src_ref,omitempty"`
	Shallow bool   `json:"shallow,omitempty"`
}
