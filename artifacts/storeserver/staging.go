package storeserver

import (
	"errors"
	"net/http"
	"strings"

	"github.com/rlpipe/rlpipe/artifacts"
	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// Presigned transfers, as lakeFS over S3 offers them (see BlockStore):
// GET /config says whether they are offered (pre_sign_support),
// getPhysicalAddress signs an upload URL, linkPhysicalAddress stages what
// was uploaded there, and a stat with presign=true answers a signed read
// URL as the physical address. Without Options.BlockStore the server is
// a lakeFS whose block store cannot presign: the config says so and the
// staging endpoints answer 501.

// blockstoreType is what GET /config reports as the block store's type.
const blockstoreType = "rlpipe-blocks"

// getConfig answers GET /config with the storage configuration.
func (s *Server) getConfig(c *call) error {
	sc := &lakefsapi.StorageConfig{BlockstoreType: "local", PreSignSupport: s.opts.BlockStore != nil}
	if sc.PreSignSupport {
		sc.BlockstoreType = blockstoreType
	}
	writeJSON(c.w, http.StatusOK, lakefsapi.Config{StorageConfig: sc, StorageConfigList: []lakefsapi.StorageConfig{*sc}})
	return nil
}

// blockStore is the block store of a staging endpoint, or the 501 lakeFS
// answers when its block store offers no such thing.
func (s *Server) blockStore(what string) (*BlockStore, error) {
	if s.opts.BlockStore == nil {
		return nil, errorf(http.StatusNotImplemented, "%s: %s: this server offers no presigned transfers (pre_sign_support is false in GET /config): upload through POST …/objects instead",
			http.StatusText(http.StatusNotImplemented), what)
	}
	return s.opts.BlockStore, nil
}

// getPhysicalAddress answers GET …/branches/{branch}/staging/backing?path=
// with a new block's address and, with presign=true, the URL to upload
// it to. Nothing is staged until the block is linked.
func (s *Server) getPhysicalAddress(c *call) error {
	branch, path, err := c.branchPath()
	if err != nil {
		return err
	}
	bs, err := s.blockStore("stage " + branch + ":" + path)
	if err != nil {
		return err
	}
	presign, err := c.boolean("presign", false)
	if err != nil {
		return err
	}
	if _, err := s.st.GetBranch(c.ctx(), branch); err != nil {
		return err
	}
	id, err := newBlockID()
	if err != nil {
		return err
	}
	loc := lakefsapi.StagingLocation{PhysicalAddress: blockScheme + id}
	if presign {
		if loc.PresignedURL, loc.PresignedURLExpiry, err = bs.sign(http.MethodPut, kindUpload, id); err != nil {
			return err
		}
	}
	writeJSON(c.w, http.StatusOK, loc)
	return nil
}

// linkPhysicalAddress answers PUT …/branches/{branch}/staging/backing?path=:
// the complete block at staging.physical_address, whose size and ETag
// the body repeats, is stored at branch:path (If-None-Match: * only if
// the path is free) and leaves the block store.
func (s *Server) linkPhysicalAddress(c *call) error {
	branch, path, err := c.branchPath()
	if err != nil {
		return err
	}
	what := "link " + branch + ":" + path
	bs, err := s.blockStore(what)
	if err != nil {
		return err
	}
	ifAbsent, err := c.ifAbsent(what)
	if err != nil {
		return err
	}
	var body lakefsapi.StagingMetadata
	if err := decodeJSON(c.r, s.opts.MaxJSONBytes, &body, false); err != nil {
		return err
	}
	addr := body.Staging.PhysicalAddress
	id, ok := strings.CutPrefix(addr, blockScheme)
	if !ok || id == "" || strings.ContainsAny(id, "/.") {
		return errorf(http.StatusBadRequest, "%s: physical address %q is not one this server handed out (want %s<id> from getPhysicalAddress)", what, addr, blockScheme)
	}
	f, sum, err := bs.take(id)
	if errors.Is(err, errBlockMissing) {
		return errorf(http.StatusBadRequest, "%s: physical address %q holds no complete upload: upload the bytes to its presigned URL first, then link", what, addr)
	}
	if err != nil {
		return err
	}
	linked := false
	defer func() {
		if linked {
			bs.discard(f)
		} else {
			f.Close()
			bs.putBack(id, sum)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != body.SizeBytes {
		return errorf(http.StatusBadRequest, "%s: size_bytes %d, but %q holds %d bytes", what, body.SizeBytes, addr, fi.Size())
	}
	if body.Checksum != "" && strings.Trim(body.Checksum, `"`) != sum {
		return errorf(http.StatusBadRequest, "%s: checksum %q, but the block store's ETag of %q is %q", what, body.Checksum, addr, sum)
	}
	ct := body.ContentType
	if isDefaultContentType(ct) {
		ct = ""
	}
	st, err := s.put(c.ctx(), branch, path, f, &artifacts.PutOptions{ContentType: ct, Metadata: lowerKeys(body.UserMetadata), IfAbsent: ifAbsent})
	if err != nil {
		return err
	}
	linked = true
	writeJSON(c.w, http.StatusOK, st)
	return nil
}

// lowerKeys is md with lower-case keys, as user metadata is kept.
func lowerKeys(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[strings.ToLower(k)] = v
	}
	return out
}

// presignRead sets st's physical address to a URL that reads the object
// version info describes at ref:path from the block store, when the
// server has one.
func (s *Server) presignRead(ref, path string, info artifacts.ObjectInfo, st *lakefsapi.ObjectStats) error {
	bs := s.opts.BlockStore
	if bs == nil {
		return nil
	}
	u, exp, err := bs.sign(http.MethodGet, kindRead, readToken(ref, path, info.Checksum))
	if err != nil {
		return err
	}
	st.PhysicalAddress, st.PhysicalAddressExpiry = u, exp
	return nil
}
