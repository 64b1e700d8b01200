package lakefsapi

import (
	"encoding/json"
	"testing"
)

// TestJSON pins the bytes of each body: request bodies leave out unset
// optional fields, answers carry every field lakeFS always sends.
func TestJSON(t *testing.T) {
	date := int64(1700000000)
	size := int64(5)
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"repository creation, no default branch", RepositoryCreation{Name: "r", StorageNamespace: "s3://x"}, `{"name":"r","storage_namespace":"s3://x"}`},
		{"branch creation", BranchCreation{Name: "b", Source: "main"}, `{"name":"b","source":"main"}`},
		{"tag creation", TagCreation{ID: "t", Ref: "main"}, `{"id":"t","ref":"main"}`},
		{"reset", ResetCreation{Type: "reset"}, `{"type":"reset"}`},
		{"reset a prefix", ResetCreation{Type: "common_prefix", Path: "p/"}, `{"type":"common_prefix","path":"p/"}`},
		{"commit creation, message only", CommitCreation{Metadata: map[string]string{}}, `{"message":""}`},
		{"commit creation", CommitCreation{Message: "m", Metadata: map[string]string{"a": "b"}, Date: &date, AllowEmpty: true},
			`{"message":"m","metadata":{"a":"b"},"date":1700000000,"allow_empty":true}`},
		{"merge, no options", Merge{}, `{}`},
		{"merge", Merge{Message: "m", Strategy: "source-wins", AllowEmpty: true}, `{"message":"m","strategy":"source-wins","allow_empty":true}`},
		{"revert", RevertCreation{Ref: "c", ParentNumber: 1}, `{"ref":"c","parent_number":1}`},
		{"revert with overrides", RevertCreation{Ref: "c", ParentNumber: 2, CommitOverrides: &CommitOverrides{Metadata: map[string]string{"k": "v"}}, AllowEmpty: true},
			`{"ref":"c","parent_number":2,"commit_overrides":{"metadata":{"k":"v"}},"allow_empty":true}`},
		{"object copy", ObjectCopyCreation{SrcPath: "a"}, `{"src_path":"a"}`},
		{"repository", Repository{ID: "r", DefaultBranch: "main"}, `{"id":"r","creation_date":0,"default_branch":"main","storage_namespace":"","read_only":false}`},
		{"ref", Ref{ID: "b", CommitID: "c"}, `{"id":"b","commit_id":"c"}`},
		{"commit, first", Commit{ID: "c", Parents: []string{}, Metadata: map[string]string{}},
			`{"id":"c","parents":[],"committer":"","message":"","creation_date":0,"meta_range_id":"","metadata":{}}`},
		{"commit", Commit{ID: "c", Parents: []string{"p"}, Committer: "me", Message: "m", CreationDate: date, MetaRangeID: "mr", Metadata: map[string]string{"a": "b"}, Generation: 3},
			`{"id":"c","parents":["p"],"committer":"me","message":"m","creation_date":1700000000,"meta_range_id":"mr","metadata":{"a":"b"},"generation":3}`},
		{"merge result", MergeResult{Reference: "c"}, `{"reference":"c"}`},
		{"merge base", FindMergeBaseResult{SourceCommitID: "a", DestinationCommitID: "b", BaseCommitID: "c"},
			`{"source_commit_id":"a","destination_commit_id":"b","base_commit_id":"c"}`},
		{"object", ObjectStats{Path: "p", PathType: PathTypeObject, Checksum: "x", SizeBytes: &size, Mtime: date, Metadata: map[string]string{"a": "b"}, ContentType: "text/plain"},
			`{"path":"p","path_type":"object","physical_address":"","checksum":"x","size_bytes":5,"mtime":1700000000,"metadata":{"a":"b"},"content_type":"text/plain"}`},
		{"common prefix", ObjectStats{Path: "d/", PathType: PathTypeCommonPrefix}, `{"path":"d/","path_type":"common_prefix","physical_address":"","checksum":"","mtime":0}`},
		{"diff", Diff{Type: "added", Path: "p", PathType: PathTypeObject, SizeBytes: &size}, `{"type":"added","path":"p","path_type":"object","size_bytes":5}`},
		{"page", Page[Ref]{Pagination: Pagination{HasMore: true, NextOffset: "a", Results: 1, MaxPerPage: 1000}, Results: []Ref{{ID: "a"}}},
			`{"pagination":{"has_more":true,"next_offset":"a","results":1,"max_per_page":1000},"results":[{"id":"a","commit_id":""}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}
