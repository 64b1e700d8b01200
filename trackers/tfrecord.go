package trackers

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TensorBoard's event files are TFRecord files of Event protocol buffers.
// The few messages written are encoded here by field number, so that the
// package needs no generated code:
//
//	Event            { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; SessionLog session_log = 7; }
//	SessionLog       { SessionStatus status = 1; }  // START = 1
//	Summary          { repeated Value value = 1; }
//	Summary.Value    { string tag = 1; float simple_value = 2; TensorProto tensor = 8; SummaryMetadata metadata = 9; }
//	SummaryMetadata  { PluginData plugin_data = 1; }
//	PluginData       { string plugin_name = 1; bytes content = 2; }
//	TensorProto      { DataType dtype = 1; TensorShapeProto tensor_shape = 2; repeated bytes string_val = 8; }

// fileVersion is the version string of the first event of every file.
const fileVersion = "brain.Event:2"

// dtString is tensorflow.DataType DT_STRING.
const dtString = 7

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// writeRecord writes data as one TFRecord: its length (uint64, little
// endian), the masked CRC of the length, the data, the masked CRC of the
// data.
func writeRecord(w io.Writer, data []byte) error {
	buf := make([]byte, 0, 16+len(data))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(data)))
	buf = binary.LittleEndian.AppendUint32(buf, maskedCRC(buf[:8]))
	buf = append(buf, data...)
	buf = binary.LittleEndian.AppendUint32(buf, maskedCRC(data))
	_, err := w.Write(buf)
	return err
}

// wallTime is t in seconds since the epoch, as Event.wall_time.
func wallTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// versionEvent is the event that opens a file.
func versionEvent(t time.Time) []byte {
	b := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallTime(t)))
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendString(b, fileVersion)
}

// startEvent is a SessionLog START at step: TensorBoard's reader drops
// the points it read before with a step from step on, so that a file
// written after a restart (or a back-fill) replaces them rather than
// doubling them.
func startEvent(t time.Time, step int) []byte {
	b := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallTime(t)))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(step)))
	sl := protowire.AppendTag(nil, 1, protowire.VarintType)
	sl = protowire.AppendVarint(sl, 1)
	return appendMessage(b, 7, sl)
}

// pointEvent is one event holding all of p's values: its scalars as
// simple values (float32) in tag order, then its texts as string tensors
// of TensorBoard's text plugin, in tag order.
func pointEvent(p Point) []byte {
	var summary []byte
	for _, tag := range p.Tags() {
		v := protowire.AppendTag(nil, 1, protowire.BytesType)
		v = protowire.AppendString(v, tag)
		v = protowire.AppendTag(v, 2, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(p.Scalars[tag])))
		summary = appendMessage(summary, 1, v)
	}
	for _, tag := range sortedKeys(p.Text) {
		v := protowire.AppendTag(nil, 1, protowire.BytesType)
		v = protowire.AppendString(v, tag)
		v = appendMessage(v, 8, textTensor(p.Text[tag]))
		v = appendMessage(v, 9, textMetadata())
		summary = appendMessage(summary, 1, v)
	}
	b := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(wallTime(p.Time)))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(p.Step)))
	return appendMessage(b, 5, summary)
}

// textTensor is a scalar string tensor.
func textTensor(s string) []byte {
	t := protowire.AppendTag(nil, 1, protowire.VarintType)
	t = protowire.AppendVarint(t, dtString)
	t = appendMessage(t, 2, nil) // a scalar: a shape without dimensions
	t = protowire.AppendTag(t, 8, protowire.BytesType)
	return protowire.AppendString(t, s)
}

// textMetadata marks a value as the text plugin's.
func textMetadata() []byte {
	pd := protowire.AppendTag(nil, 1, protowire.BytesType)
	pd = protowire.AppendString(pd, "text")
	return appendMessage(nil, 1, pd)
}

// appendMessage appends an embedded message as field num.
func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}
