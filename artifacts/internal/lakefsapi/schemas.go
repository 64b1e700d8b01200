package lakefsapi

// Repository is the schema Repository.
type Repository struct {
	ID               string `json:"id"`
	CreationDate     int64  `json:"creation_date"`
	DefaultBranch    string `json:"default_branch"`
	StorageNamespace string `json:"storage_namespace"`
	ReadOnly         bool   `json:"read_only"`
}

// RepositoryCreation is the schema RepositoryCreation.
type RepositoryCreation struct {
	Name             string `json:"name"`
	StorageNamespace string `json:"storage_namespace"`
	DefaultBranch    string `json:"default_branch,omitempty"`
}

// Ref is the schema Ref: a branch or a tag.
type Ref struct {
	ID       string `json:"id"`
	CommitID string `json:"commit_id"`
}

// BranchCreation is the schema BranchCreation.
type BranchCreation struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// TagCreation is the schema TagCreation.
type TagCreation struct {
	ID  string `json:"id"`
	Ref string `json:"ref"`
}

// ResetCreation is the schema ResetCreation.
type ResetCreation struct {
	Type string `json:"type"` // "reset", "common_prefix" or "object"
	Path string `json:"path,omitempty"`
}

// Commit is the schema Commit.
type Commit struct {
	ID           string            `json:"id"`
	Parents      []string          `json:"parents"`
	Committer    string            `json:"committer"`
	Message      string            `json:"message"`
	CreationDate int64             `json:"creation_date"`
	MetaRangeID  string            `json:"meta_range_id"`
	Metadata     map[string]string `json:"metadata"`
	Generation   int64             `json:"generation,omitempty"`
}

// CommitCreation is the schema CommitCreation.
type CommitCreation struct {
	Message    string            `json:"message"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Date       *int64            `json:"date,omitempty"`
	AllowEmpty bool              `json:"allow_empty,omitempty"`
}

// Merge is the schema Merge.
type Merge struct {
	Message     string            `json:"message,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Strategy    string            `json:"strategy,omitempty"`
	AllowEmpty  bool              `json:"allow_empty,omitempty"`
	SquashMerge bool              `json:"squash_merge,omitempty"`
}

// MergeResult is the schema MergeResult.
type MergeResult struct {
	Reference string `json:"reference"`
}

// FindMergeBaseResult is the schema FindMergeBaseResult.
type FindMergeBaseResult struct {
	SourceCommitID      string `json:"source_commit_id"`
	DestinationCommitID string `json:"destination_commit_id"`
	BaseCommitID        string `json:"base_commit_id"`
}

// CommitOverrides is the schema CommitOverrides.
type CommitOverrides struct {
	Message  string            `json:"message,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// RevertCreation is the schema RevertCreation.
type RevertCreation struct {
	Ref             string           `json:"ref"`
	ParentNumber    int              `json:"parent_number"`
	CommitOverrides *CommitOverrides `json:"commit_overrides,omitempty"`
	AllowEmpty      bool             `json:"allow_empty,omitempty"`
}

// ObjectCopyCreation is the schema ObjectCopyCreation.
type ObjectCopyCreation struct {
	SrcPath string `json:"src_path"`
	SrcRef  string `json:"src_ref,omitempty"`
	Shallow bool   `json:"shallow,omitempty"`
}

// Path types of ObjectStats and Diff.
const (
	PathTypeObject       = "object"
	PathTypeCommonPrefix = "common_prefix"
)

// ObjectStats is the schema ObjectStats: an object, or a common prefix in
// a listing with a delimiter.
type ObjectStats struct {
	Path            string `json:"path"`
	PathType        string `json:"path_type"` // PathTypeObject or PathTypeCommonPrefix
	PhysicalAddress string `json:"physical_address"`
	// PhysicalAddressExpiry, when set, says that PhysicalAddress is a
	// presigned URL (a stat with presign=true) and when it expires.
	PhysicalAddressExpiry int64             `json:"physical_address_expiry,omitempty"`
	Checksum              string            `json:"checksum"`
	SizeBytes             *int64            `json:"size_bytes,omitempty"`
	Mtime                 int64             `json:"mtime"`
	Metadata              map[string]string `json:"metadata,omitempty"`
	ContentType           string            `json:"content_type,omitempty"`
}

// Diff is the schema Diff: one row of a diff.
type Diff struct {
	Type      string `json:"type"` // added, removed, changed, conflict, prefix_changed
	Path      string `json:"path"`
	PathType  string `json:"path_type"`
	SizeBytes *int64 `json:"size_bytes,omitempty"`
}

// Pagination is the schema Pagination.
type Pagination struct {
	HasMore    bool   `json:"has_more"`
	NextOffset string `json:"next_offset"`
	Results    int    `json:"results"`
	MaxPerPage int    `json:"max_per_page"`
}

// Page is one page of a listing: the shape of RefList, CommitList,
// ObjectStatsList and DiffList, with results of type T.
type Page[T any] struct {
	Pagination Pagination `json:"pagination"`
	Results    []T        `json:"results"`
}

// StagingLocation is the schema StagingLocation: where getPhysicalAddress
// says to upload an object's bytes before linkPhysicalAddress stages it.
type StagingLocation struct {
	PhysicalAddress    string `json:"physical_address,omitempty"`
	PresignedURL       string `json:"presigned_url,omitempty"`
	PresignedURLExpiry int64  `json:"presigned_url_expiry,omitempty"`
}

// StagingMetadata is the schema StagingMetadata: the body of
// linkPhysicalAddress, describing bytes uploaded to a StagingLocation.
type StagingMetadata struct {
	Staging      StagingLocation   `json:"staging"`
	Checksum     string            `json:"checksum"`
	SizeBytes    int64             `json:"size_bytes"`
	UserMetadata map[string]string `json:"user_metadata,omitempty"`
	ContentType  string            `json:"content_type,omitempty"`
}

// StorageConfig is the part of the schema StorageConfig rlpipe reads:
// whether the server hands out presigned URLs to its block store.
type StorageConfig struct {
	BlockstoreType string `json:"blockstore_type"`
	PreSignSupport bool   `json:"pre_sign_support"`
}

// Config is the part of the schema Config (GET /config) rlpipe reads.
type Config struct {
	StorageConfig     *StorageConfig  `json:"storage_config,omitempty"`
	StorageConfigList []StorageConfig `json:"storage_config_list,omitempty"`
}
