package storeserver

import (
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// The JSON bodies the server reads and writes are package lakefsapi's;
// this file makes them from the types of package artifacts.

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

func fromRepository(name string, r artifacts.Repository) lakefsapi.Repository {
	return lakefsapi.Repository{
		ID:               name,
		CreationDate:     unixSeconds(r.CreatedAt),
		DefaultBranch:    r.DefaultBranch,
		StorageNamespace: r.StorageNamespace,
	}
}

func fromCommit(c artifacts.Commit) lakefsapi.Commit {
	parents := c.Parents
	if parents == nil {
		parents = []string{}
	}
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return lakefsapi.Commit{
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
// metadata. The checksum and metadata are o's: Server.describe sets them
// to what the server reports.
func fromObjectInfo(o artifacts.ObjectInfo, userMetadata bool) lakefsapi.ObjectStats {
	size := o.Size
	st := lakefsapi.ObjectStats{
		Path:        o.Path,
		PathType:    lakefsapi.PathTypeObject,
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

func fromChange(ch artifacts.Change) lakefsapi.Diff {
	size := ch.Size
	return lakefsapi.Diff{Type: string(ch.Type), Path: ch.Path, PathType: lakefsapi.PathTypeObject, SizeBytes: &size}
}
