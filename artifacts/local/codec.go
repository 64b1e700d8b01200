package local

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Ranges and metaranges are stored in a compact binary form: a version
// byte, a count, then per item length-prefixed strings and varints. It is
// canonical (metadata keys sorted), so equal contents give equal bytes and
// equal ids, and it decodes several times faster than JSON, which matters
// because diff and commit cost is mostly decoding the ranges they touch.
//
// A range, and a metarange record that lists ranges (a whole small tree,
// or a chunk of a large one), are version 1. A metarange record that
// lists other metarange records (the upper levels of a large tree, see
// tree.go) is version 2: the version byte, its level (2 or more: it lists
// records of the level below, level 1 being the lists of ranges), a
// count, then per child its id, first path, last path, number of entries
// and number of ranges under it.

const (
	codecVersion = 1
	nodeVersion  = 2
	maxLevel     = 64 // no store comes near it; bounds what a corrupt record can claim
)

var errCodec = errors.New("malformed tree record")

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// rangeRef encodes what every metarange record holds of a range: its id,
// its first and last paths and its object count.
func (e *encoder) rangeRef(r rangeRef) {
	e.str(r.ID)
	e.str(r.Min)
	e.str(r.Max)
	e.uvarint(uint64(r.Count))
}

type decoder struct {
	b   []byte
	err error
}

// fail marks the record corrupt and drops what is left of it.
func (d *decoder) fail() {
	d.err = errCodec
	d.b = nil
}

// took drops the n bytes a varint was read from; n <= 0 (binary.Uvarint's
// and binary.Varint's "could not read one") fails the record.
func (d *decoder) took(n int) bool {
	if n <= 0 {
		d.fail()
		return false
	}
	d.b = d.b[n:]
	return true
}

func (d *decoder) uvarint() uint64 {
	if v, n := binary.Uvarint(d.b); d.took(n) {
		return v
	}
	return 0
}

func (d *decoder) varint() int64 {
	if v, n := binary.Varint(d.b); d.took(n) {
		return v
	}
	return 0
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads an item count, bounded by the bytes left (each item takes at
// least one byte) so a corrupt record cannot ask for a huge allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errCodec
		return 0
	}
	return int(n)
}

func (d *decoder) header() {
	if len(d.b) == 0 || d.b[0] != codecVersion {
		d.err = errCodec
		return
	}
	d.b = d.b[1:]
}

func encodeEntries(es []entry) []byte {
	e := encoder{b: make([]byte, 0, 128*len(es))}
	e.b = append(e.b, codecVersion)
	e.uvarint(uint64(len(es)))
	for i := range es {
		x := &es[i]
		e.str(x.Path)
		e.str(x.Digest)
		e.varint(x.Size)
		e.varint(x.Mtime)
		e.str(x.ContentType)
		keys := make([]string, 0, len(x.Metadata))
		for k := range x.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.uvarint(uint64(len(keys)))
		for _, k := range keys {
			e.str(k)
			e.str(x.Metadata[k])
		}
	}
	return e.b
}

func decodeEntries(b []byte) ([]entry, error) {
	d := decoder{b: b}
	d.header()
	n := d.count()
	es := make([]entry, n)
	for i := 0; i < n && d.err == nil; i++ {
		x := &es[i]
		x.Path = d.str()
		x.Digest = d.str()
		x.Size = d.varint()
		x.Mtime = d.varint()
		x.ContentType = d.str()
		if m := d.count(); m > 0 {
			x.Metadata = make(map[string]string, m)
			for j := 0; j < m && d.err == nil; j++ {
				k := d.str()
				x.Metadata[k] = d.str()
			}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCodec
	}
	return es, d.err
}

func encodeMeta(m metaRange) []byte {
	e := encoder{b: make([]byte, 0, 160*len(m))}
	e.b = append(e.b, codecVersion)
	e.uvarint(uint64(len(m)))
	for _, r := range m {
		e.rangeRef(r)
	}
	return e.b
}

// findRange returns the id of the range of metarange record b whose
// span holds path ("" when none does), reading the record in place: no
// string but the id is made, so a lookup in a metarange read once (one
// file of each of 2,000 iterations' commits) does not decode it whole.
// Ranges are in path order, as decodeMeta returns them.
func findRange(b []byte, path string) (string, error) {
	d := decoder{b: b}
	d.header()
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		id, lo, hi := d.bytes(), d.bytes(), d.bytes()
		d.uvarint()
		if d.err == nil && string(hi) >= path {
			if string(lo) > path {
				return "", nil
			}
			return string(id), nil
		}
	}
	return "", d.err
}

// findEntry returns the entry of path in range record b (nil when the
// range does not hold it), reading the record in place: only the entry
// found is decoded. Entries are in path order, as decodeEntries returns
// them.
func findEntry(b []byte, path string) (*entry, error) {
	d := decoder{b: b}
	d.header()
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		p := d.bytes()
		if d.err == nil && string(p) == path {
			x := &entry{Path: path, Digest: d.str(), Size: d.varint(), Mtime: d.varint(), ContentType: d.str()}
			if m := d.count(); m > 0 {
				x.Metadata = make(map[string]string, m)
				for j := 0; j < m && d.err == nil; j++ {
					k := d.str()
					x.Metadata[k] = d.str()
				}
			}
			if d.err != nil {
				return nil, d.err
			}
			return x, nil
		}
		if string(p) > path {
			return nil, d.err
		}
		d.bytes()
		d.varint()
		d.varint()
		d.bytes()
		m := d.count()
		for j := 0; j < 2*m && d.err == nil; j++ {
			d.bytes()
		}
	}
	return nil, d.err
}

// bytes is str without the copy: valid while the record is.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errCodec
		d.b = nil
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// encodeNode encodes a metarange record of level 2 or more.
func encodeNode(level int, m metaRange) []byte {
	e := encoder{b: make([]byte, 0, 170*len(m))}
	e.b = append(e.b, nodeVersion)
	e.uvarint(uint64(level))
	e.uvarint(uint64(len(m)))
	for _, r := range m {
		e.rangeRef(r)
		e.uvarint(uint64(r.Ranges))
	}
	return e.b
}

// nodeHeader reads the version and level of a metarange record of either
// version (level 1 for version 1).
func (d *decoder) nodeHeader() int {
	if len(d.b) == 0 {
		d.err = errCodec
		return 0
	}
	switch d.b[0] {
	case codecVersion:
		d.b = d.b[1:]
		return 1
	case nodeVersion:
		d.b = d.b[1:]
		l := d.uvarint()
		if d.err == nil && (l < 2 || l > maxLevel) {
			d.err = errCodec
		}
		return int(l)
	}
	d.err = errCodec
	return 0
}

// decodeNode decodes a metarange record of either version.
func decodeNode(b []byte) (node, error) {
	d := decoder{b: b}
	level := d.nodeHeader()
	n := d.count()
	m := make(metaRange, n)
	for i := 0; i < n && d.err == nil; i++ {
		m[i] = rangeRef{ID: d.str(), Min: d.str(), Max: d.str(), Count: int(d.uvarint())}
		if level > 1 {
			m[i].Ranges = int(d.uvarint())
		}
	}
	if d.err == nil && (len(d.b) != 0 || level > 1 && n == 0) {
		d.err = errCodec
	}
	return node{level: level, refs: m}, d.err
}

// findChild is findRange for a metarange record of either version: the
// id of the child whose span holds path ("" when none does) and the
// record's level (1: the child is a range).
func findChild(b []byte, path string) (string, int, error) {
	d := decoder{b: b}
	level := d.nodeHeader()
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		id, lo, hi := d.bytes(), d.bytes(), d.bytes()
		d.uvarint()
		if level > 1 {
			d.uvarint()
		}
		if d.err == nil && string(hi) >= path {
			if string(lo) > path {
				return "", level, nil
			}
			return string(id), level, nil
		}
	}
	return "", level, d.err
}

// decodeMeta decodes a version 1 metarange record (a list of ranges).
func decodeMeta(b []byte) (metaRange, error) {
	d := decoder{b: b}
	d.header()
	n := d.count()
	m := make(metaRange, n)
	for i := 0; i < n && d.err == nil; i++ {
		m[i] = rangeRef{ID: d.str(), Min: d.str(), Max: d.str(), Count: int(d.uvarint())}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCodec
	}
	return m, d.err
}
