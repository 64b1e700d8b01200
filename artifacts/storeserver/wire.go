package storeserver

import (
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

// Wire types: the JSON bodies of the lakeFS API (v1) the server reads and
// writes, named and shaped as in its OpenAPI document. Times are Unix
// seconds on the wire.

type wireRepository struct {
	ID               string `json:"id"`
	CreationDate     int64  `json:"creation_date"`
	DefaultBranch    string `json:"default_branch"`
	StorageNamespace string `json:"storage_namespace"`
	ReadOnly         bool   `json:"read_only"`
}

type wireRepositoryCreation struct {
	Name             string `json:"name"`
	StorageNamespace string `json:"storage_namespace"`
	DefaultBranch    string `json:"default_branch"`
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
	Path string `json:"path"`
}

type wireCommit struct {
	ID           string            `json:"id"`
	Parents      []string          `json:"parents"`
	Committer    string            `json:"committer"`
	Message      string            `json:"message"`
	CreationDate int64             `json:"creation_date"`
	MetaRangeID  string            `json:"meta_range_id"`
	Metadata     map[string]string `json:"metadata"`
	Generation   int64             `json:"generation,omitempty"`
}

type wireCommitCreation struct {
	Message    string            `json:"message"`
	Metadata   map[string]string `json:"metadata"`
	Date       *int64            `json:"date"`
	AllowEmpty bool              `json:"allow_empty"`
}

type wireMerge struct {
	Message     string            `json:"message"`
	Metadata    map[string]string `json:"metadata"`
	Strategy    string            `json:"strategy"`
	AllowEmpty  bool              `json:"allow_empty"`
	SquashMerge bool              `json:"squash_merge"`
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
	Message  string            `json:"message"`
	Metadata map[string]string `json:"metadata"`
}

type wireRevertCreation struct {
	Ref             *string              `json:"ref"`
	ParentNumber    int                  `json:"parent_number"`
	CommitOverrides *wireCommitOverrides `json:"commit_overrides"`
	AllowEmpty      bool                 `json:"allow_empty"`
}

type wireObjectCopy struct {
	SrcPath string `json:"src_path"`
	SrcRef  string `json:"src_ref"`
	Shallow bool   `json:"shallow"`
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
	SizeBytes       *int64            `json:"size_bytes,omitempty"`
	Mtime           int64             `json:"mtime"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	ContentType     string            `json:"content_type,omitempty"`
}

type wireDiff struct {
	Type      string `json:"type"` // added, removed, changed
	Path      string `json:"path"`
	PathType  string `json:"path_type"`
	SizeBytes *int64 `json:"size_bytes,omitempty"`
}

type wirePagination struct {
	HasMore    bool   `json:"has_more"`
	NextOffset string `json:"next_offset"`
	Results    int    `json:"results"`
	MaxPerPage int    `json:"max_per_page"`
}

type wirePage[T any] struct {
	Pagination wirePagination `json:"pagination"`
	Results    []T            `json:"results"`
}

// Page sizes, as lakeFS: 100 unless asked, at most 1000.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func fromRepository(name string, r artifacts.Repository) wireRepository {
	return wireRepository{
		ID:               name,
		CreationDate:     unixSeconds(r.CreatedAt),
		DefaultBranch:    r.DefaultBranch,
		StorageNamespace: r.StorageNamespace,
	}
}

func fromCommit(c artifacts.Commit) wireCommit {
	parents := c.Parents
	if parents == nil {
		parents = []string{}
	}
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return wireCommit{
		ID:           c.ID,
		Parents:      parents,
		Committer:    c.Committer,
		Message:      c.Message,
		CreationDate: unixSeconds(c.CreationDate),
		MetaRangeID:  c.MetaRangeID,
		Metadata:     md,
		Generation:   int64(c.Generation),
	}
}

// fromObjectInfo describes an object; userMetadata false leaves out its
// metadata. The checksum is the store's own, so that it is the same
// through the server as in the store.
func fromObjectInfo(o artifacts.ObjectInfo, userMetadata bool) wireObjectStats {
	size := o.Size
	st := wireObjectStats{
		Path:        o.Path,
		PathType:    pathTypeObject,
		Checksum:    o.Checksum,
		SizeBytes:   &size,
		Mtime:       unixSeconds(o.Mtime),
		ContentType: o.ContentType,
	}
	if userMetadata && len(o.Metadata) > 0 {
		st.Metadata = o.Metadata
	}
	return st
}

func fromEntry(e artifacts.Entry, userMetadata bool) wireObjectStats {
	if e.CommonPrefix {
		return wireObjectStats{Path: e.Path, PathType: pathTypeCommonPrefix}
	}
	return fromObjectInfo(e.ObjectInfo, userMetadata)
}

func fromChange(ch artifacts.Change) wireDiff {
	size := ch.Size
	return wireDiff{Type: string(ch.Type), Path: ch.Path, PathType: pathTypeObject, SizeBytes: &size}
}
