package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// Writer builds a GGUF v3 file the way llama.cpp's gguf writer lays it
// out: header, metadata in insertion order, tensor infos, padding to the
// alignment, then each tensor's data padded to the alignment.
type Writer struct {
	kvs     []KV
	tensors []wtensor
}

type wtensor struct {
	info TensorInfo
	fill func(io.Writer) error
}

// NewWriter returns an empty writer.
func NewWriter() *Writer { return &Writer{} }

// Set adds key, or replaces its value in place when already set.
func (w *Writer) Set(key string, v Value) {
	for i := range w.kvs {
		if w.kvs[i].Key == key {
			w.kvs[i].Value = v
			return
		}
	}
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
}

// Delete removes key if it is set (a file as an older converter wrote
// it, without a key that is written now).
func (w *Writer) Delete(key string) {
	w.kvs = slices.DeleteFunc(w.kvs, func(kv KV) bool { return kv.Key == key })
}

// KVs returns the metadata set so far.
func (w *Writer) KVs() []KV { return w.kvs }

// alignment is general.alignment, or DefaultAlignment when unset. It is
// held to what the reader accepts (a power-of-two u32 up to MaxAlignment),
// so the writer never pads past its zero buffer nor writes a file that
// cannot be read back.
func (w *Writer) alignment() (uint64, error) {
	for _, kv := range w.kvs {
		if kv.Key == "general.alignment" {
			v := kv.Value
			a, ok := v.Int()
			if v.Type != TypeUint32 || !ok || a <= 0 || a&(a-1) != 0 || a > MaxAlignment {
				return 0, fmt.Errorf("gguf: general.alignment must be a power-of-two u32 up to %d, got %s %v: %w", MaxAlignment, v.Type, v, ErrInvalid)
			}
			return uint64(a), nil
		}
	}
	return DefaultAlignment, nil
}

// AddTensor adds a tensor whose bytes are already in memory.
func (w *Writer) AddTensor(name string, typ Type, dims []uint64, data []byte) error {
	return w.AddTensorFunc(name, typ, dims, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	}, uint64(len(data)))
}

// AddTensorFunc adds a tensor whose bytes fill writes when the file is
// written, so multi-GB models are streamed, never held whole. size must
// equal the size implied by typ and dims; it guards against mismatches.
func (w *Writer) AddTensorFunc(name string, typ Type, dims []uint64, fill func(io.Writer) error, size uint64) error {
	if name == "" || len(name) >= MaxTensorName {
		return fmt.Errorf("gguf: tensor name %q must be 1 to %d bytes", name, MaxTensorName-1)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(dims))
	}
	for _, t := range w.tensors {
		if t.info.Name == name {
			return fmt.Errorf("gguf: duplicate tensor %q", name)
		}
	}
	n := uint64(1)
	for _, d := range dims {
		if d == 0 {
			return fmt.Errorf("gguf: tensor %q: zero dimension", name)
		}
		n *= d
	}
	want, err := typ.RowBytes(n)
	if err == nil && dims[0]%mustInfo(typ).BlockSize != 0 {
		err = fmt.Errorf("row length %d is not a multiple of the block size", dims[0])
	}
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if size != want {
		return fmt.Errorf("gguf: tensor %q: %d bytes given, %s %v needs %d", name, size, typ, dims, want)
	}
	w.tensors = append(w.tensors, wtensor{
		info: TensorInfo{Name: name, Type: typ, Dims: slices.Clone(dims), Size: want},
		fill: fill,
	})
	return nil
}

func mustInfo(t Type) TypeInfo { ti, _ := t.Info(); return ti }

// WriteFile writes the file to path (via a temporary file, renamed into
// place once complete).
func (w *Writer) WriteFile(path string) error {
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, err := w.WriteTo(fh); err != nil {
		fh.Close()
		os.Remove(tmp)
		return err
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: %w", err)
	}
	return os.Rename(tmp, path)
}

// WriteTo writes the whole file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	cw := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	if _, err := w.header(cw); err != nil {
		return cw.n, err
	}
	e := &encoder{w: cw}
	align, _ := w.alignment() // header checked it
	for _, t := range w.tensors {
		start := cw.n
		if err := t.fill(cw); err != nil {
			return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
		}
		if got := uint64(cw.n - start); got != t.info.Size {
			return cw.n, fmt.Errorf("gguf: tensor %q: wrote %d bytes, want %d", t.info.Name, got, t.info.Size)
		}
		e.pad(align)
	}
	if e.err != nil {
		return cw.n, fmt.Errorf("gguf: %w", e.err)
	}
	if err := cw.w.Flush(); err != nil {
		return cw.n, fmt.Errorf("gguf: %w", err)
	}
	return cw.n, nil
}

// WriteHeader writes only the header (everything before the first
// tensor's data, padding included) and returns the size the whole file
// will have. Tools use it to lay out a file without generating its data.
func (w *Writer) WriteHeader(out io.Writer) (fileSize int64, err error) {
	cw := &countWriter{w: bufio.NewWriter(out)}
	dataLen, err := w.header(cw)
	if err != nil {
		return 0, err
	}
	if err := cw.w.Flush(); err != nil {
		return 0, fmt.Errorf("gguf: %w", err)
	}
	return cw.n + int64(dataLen), nil
}

// header writes magic, counts, metadata, tensor infos and the padding
// before the data section; it returns the data section's length.
func (w *Writer) header(cw *countWriter) (uint64, error) {
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	e := &encoder{w: cw}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		e.value(kv.Value)
	}
	off := uint64(0)
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = off
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		off = alignUp(off+t.Size, align)
	}
	if len(w.tensors) > 0 {
		e.pad(align)
	}
	if e.err != nil {
		return 0, fmt.Errorf("gguf: %w", e.err)
	}
	return off, nil
}

type countWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian values, remembering the first error.
type encoder struct {
	w   *countWriter
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.w.WriteString(s)
		e.w.n += int64(len(s))
	}
}

func (e *encoder) pad(align uint64) {
	var zeros [MaxAlignment]byte
	if n := alignUp(uint64(e.w.n), align) - uint64(e.w.n); n > 0 {
		e.raw(zeros[:n])
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (e *encoder) value(v Value) {
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case bool:
		e.u8(b2u(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	default:
		e.array(v)
	}
}

func (e *encoder) array(v Value) {
	if v.Type != TypeArray {
		if e.err == nil {
			e.err = fmt.Errorf("value of type %s holds %T", v.Type, v.v)
		}
		return
	}
	e.u32(uint32(v.Elem))
	e.u64(uint64(v.Len()))
	switch a := v.v.(type) {
	case []uint8:
		e.raw(a)
	case []int8:
		for _, x := range a {
			e.u8(uint8(x))
		}
	case []bool:
		for _, x := range a {
			e.u8(b2u(x))
		}
	case []uint16:
		for _, x := range a {
			e.u16(x)
		}
	case []int16:
		for _, x := range a {
			e.u16(uint16(x))
		}
	case []uint32:
		for _, x := range a {
			e.u32(x)
		}
	case []int32:
		for _, x := range a {
			e.u32(uint32(x))
		}
	case []float32:
		for _, x := range a {
			e.u32(math.Float32bits(x))
		}
	case []uint64:
		for _, x := range a {
			e.u64(x)
		}
	case []int64:
		for _, x := range a {
			e.u64(uint64(x))
		}
	case []float64:
		for _, x := range a {
			e.u64(math.Float64bits(x))
		}
	case []string:
		for _, x := range a {
			e.str(x)
		}
	case []Value:
		for _, x := range a {
			e.array(x)
		}
	}
}
