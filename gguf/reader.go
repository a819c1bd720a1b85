package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Magic is the four bytes every GGUF file starts with ("GGUF").
const Magic = "GGUF"

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// Named bounds on untrusted sizes, checked before anything is allocated.
// Every count is also bounded by the bytes left in the file.
const (
	MaxKeyLength    = 1 << 16 // metadata key bytes
	MaxStringLength = 1 << 28 // one metadata string (chat templates run to tens of KB)
	MaxArrayLength  = 1 << 26 // elements of one metadata array
	MaxArrayDepth   = 4       // nesting of arrays of arrays
	MaxKVs          = 1 << 20
	MaxTensors      = 1 << 20
	MaxTensorName   = 64 // GGML_MAX_NAME, including llama.cpp's terminating NUL budget
	MaxDims         = 4  // GGML_MAX_DIMS
	MaxAlignment    = 1 << 16
	MaxElements     = 1 << 48 // elements of one tensor
)

// Sentinel errors callers can branch on with errors.Is.
var (
	ErrBadMagic  = errors.New("not a GGUF file (bad magic)")
	ErrBigEndian = errors.New("big-endian GGUF files are not supported")
	ErrVersion   = errors.New("unsupported GGUF version")
	ErrTruncated = errors.New("file is truncated")
	ErrInvalid   = errors.New("invalid GGUF file")
)

// TensorInfo describes one tensor. Dims are in ggml order: Dims[0] is the
// contiguous row length, so a [rows, cols] matrix in PyTorch terms is
// Dims = {cols, rows}.
type TensorInfo struct {
	Name   string
	Type   Type
	Dims   []uint64
	Offset uint64 // from the start of the data section
	Size   uint64 // bytes
}

// Elements is the number of elements (product of Dims).
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Tensor data stays in the mapped file: the
// byte views returned by Data are valid until Close.
type File struct {
	Version    uint32
	KVs        []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset uint64 // absolute file offset of the data section
	Size       uint64 // file size in bytes

	buf     []byte
	kvIndex map[string]int
	tIndex  map[string]int
	unmap   func() error
}

// Open maps the file read-only and parses its header. Nothing is copied:
// tensors are views into the mapping.
func Open(path string) (*File, error) {
	fh, size, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: mmap %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		syscall.Munmap(data)
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	f.unmap = func() error { return syscall.Munmap(data) }
	return f, nil
}

// openRegular opens path for reading, checking that it is a regular file
// of a size a GGUF can have and this process can map.
func openRegular(path string) (*os.File, int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("gguf: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, 0, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	switch {
	case !st.Mode().IsRegular():
		err = fmt.Errorf("gguf: %s: not a regular file", path)
	case size < 4:
		err = fmt.Errorf("gguf: %s: %w (%d bytes)", path, ErrTruncated, size)
	case uint64(size) > math.MaxInt:
		err = fmt.Errorf("gguf: %s: file too large to map", path)
	}
	if err != nil {
		fh.Close()
		return nil, 0, err
	}
	return fh, size, nil
}

// Close releases the mapping; tensor views must not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap, f.buf = nil, nil
	return u()
}

// Parse parses a GGUF image held in memory. Tensor views alias b.
func Parse(b []byte) (*File, error) {
	r := &reader{b: b}
	f, err := r.file()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f.buf = b
	return f, nil
}

// Get returns the value stored under key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data is the tensor's bytes, a view into the file (no copy).
func (f *File) Data(t *TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	return f.buf[start : start+t.Size : start+t.Size]
}

// reader decodes little-endian values from b, tracking the offset for
// error messages. Every read is bounds-checked against what remains.
type reader struct {
	b   []byte
	off uint64
}

func (r *reader) remaining() uint64 { return uint64(len(r.b)) - r.off }

func (r *reader) errf(at uint64, format string, args ...any) error {
	return fmt.Errorf("offset %d: "+format, append([]any{at}, args...)...)
}

func (r *reader) need(n uint64, what string) error {
	if n > r.remaining() {
		return fmt.Errorf("offset %d: %s needs %d bytes, %d left: %w", r.off, what, n, r.remaining(), ErrTruncated)
	}
	return nil
}

func (r *reader) bytes(n uint64, what string) ([]byte, error) {
	if err := r.need(n, what); err != nil {
		return nil, err
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

func (r *reader) u32(what string) (uint32, error) {
	s, err := r.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s), nil
}

func (r *reader) u64(what string) (uint64, error) {
	s, err := r.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s), nil
}

// label names a field in error messages: what, formatted with idx when
// idx >= 0 (what then holds one %d). It is only formatted on failure, so
// the hot loops (a 128k-token vocabulary) build no messages.
type label struct {
	what string
	idx  int
}

func (l label) String() string {
	if l.idx < 0 {
		return l.what
	}
	return fmt.Sprintf(l.what, l.idx)
}

// strLen reads a GGUF string's u64 length and checks it against limit and
// the bytes left, leaving r.off at the string's bytes.
func (r *reader) strLen(limit uint64, l label) (uint64, error) {
	at := r.off
	if r.remaining() < 8 {
		return 0, r.errf(at, "%s length needs 8 bytes, %d left: %w", l, r.remaining(), ErrTruncated)
	}
	n := binary.LittleEndian.Uint64(r.b[at:])
	r.off += 8
	if n > limit {
		return 0, r.errf(at, "%s length %d exceeds the limit %d: %w", l, n, limit, ErrInvalid)
	}
	if n > r.remaining() {
		return 0, r.errf(at, "%s length %d runs past the end of the file (%d bytes left): %w", l, n, r.remaining(), ErrTruncated)
	}
	return n, nil
}

// str reads a GGUF string (u64 length, bytes) no longer than limit.
func (r *reader) str(limit uint64, l label) (string, error) {
	n, err := r.strLen(limit, l)
	if err != nil {
		return "", err
	}
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s, nil
}

func (r *reader) file() (*File, error) {
	if len(r.b) < 4 {
		return nil, fmt.Errorf("offset 0: %w (%d bytes)", ErrTruncated, len(r.b))
	}
	if string(r.b[:4]) != Magic {
		return nil, fmt.Errorf("offset 0: %w: % x", ErrBadMagic, r.b[:4])
	}
	r.off = 4
	version, err := r.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, fmt.Errorf("offset 4: %w (version field reads %#x)", ErrBigEndian, version)
	default:
		return nil, fmt.Errorf("offset 4: %w %d (v2 and v3 are read)", ErrVersion, version)
	}
	f := &File{Version: version, Alignment: DefaultAlignment, Size: uint64(len(r.b))}

	at := r.off
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	// A count over the limit is invalid; one the bytes left cannot hold
	// (each tensor info takes at least 8 (name) + 4 + 8 (one dim) + 4 + 8
	// bytes) means the file was cut short.
	if nTensors > MaxTensors {
		return nil, r.errf(at, "tensor count %d exceeds the limit %d: %w", nTensors, MaxTensors, ErrInvalid)
	}
	if nTensors > r.remaining()/32 {
		return nil, r.errf(at, "tensor count %d is impossible for a %d-byte file: %w", nTensors, len(r.b), ErrTruncated)
	}
	at = r.off
	nKV, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Each entry takes at least 8 (key length) + 4 (type) + 1 byte.
	if nKV > MaxKVs {
		return nil, r.errf(at, "metadata count %d exceeds the limit %d: %w", nKV, MaxKVs, ErrInvalid)
	}
	if nKV > r.remaining()/13 {
		return nil, r.errf(at, "metadata count %d is impossible for a %d-byte file: %w", nKV, len(r.b), ErrTruncated)
	}

	f.KVs = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := uint64(0); i < nKV; i++ {
		at := r.off
		key, err := r.str(MaxKeyLength, label{"metadata key #%d", int(i)})
		if err != nil {
			return nil, err
		}
		if key == "" || !utf8.ValidString(key) {
			return nil, r.errf(at, "metadata key #%d is empty or not UTF-8: %w", i, ErrInvalid)
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, r.errf(at, "duplicate metadata key %q: %w", key, ErrInvalid)
		}
		vat := r.off
		t, err := r.u32("value type")
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		v, err := r.value(ValueType(t), 0, key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if key == "general.alignment" {
			a, ok := v.Int()
			if v.Type != TypeUint32 || !ok || a == 0 || a&(a-1) != 0 || a > MaxAlignment {
				return nil, r.errf(vat, "general.alignment must be a power-of-two u32 up to %d, got %s %v: %w", MaxAlignment, v.Type, v, ErrInvalid)
			}
			f.Alignment = uint64(a)
		}
		f.kvIndex[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tIndex = make(map[string]int, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		at := r.off
		t, err := r.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tIndex[t.Name]; dup {
			return nil, r.errf(at, "tensor %q: duplicate tensor name: %w", t.Name, ErrInvalid)
		}
		f.tIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	f.DataOffset = alignUp(r.off, f.Alignment)
	if len(f.Tensors) > 0 && f.DataOffset > uint64(len(r.b)) {
		return nil, r.errf(r.off, "data section at %d starts past the end of the file: %w", f.DataOffset, ErrTruncated)
	}
	return f, f.checkTensorData()
}

// value decodes one metadata value of type t.
func (r *reader) value(t ValueType, depth int, key string) (Value, error) {
	at := r.off
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		s, err := r.bytes(1, "value")
		if err != nil {
			return Value{}, err
		}
		switch t {
		case TypeUint8:
			return Uint8(s[0]), nil
		case TypeInt8:
			return Int8(int8(s[0])), nil
		}
		if s[0] > 1 {
			return Value{}, r.errf(at, "bool value %d is neither 0 nor 1: %w", s[0], ErrInvalid)
		}
		return Bool(s[0] == 1), nil
	case TypeUint16, TypeInt16:
		s, err := r.bytes(2, "value")
		if err != nil {
			return Value{}, err
		}
		u := binary.LittleEndian.Uint16(s)
		if t == TypeUint16 {
			return Uint16(u), nil
		}
		return Int16(int16(u)), nil
	case TypeUint32, TypeInt32, TypeFloat32:
		u, err := r.u32("value")
		if err != nil {
			return Value{}, err
		}
		switch t {
		case TypeUint32:
			return Uint32(u), nil
		case TypeInt32:
			return Int32(int32(u)), nil
		}
		return Float32(math.Float32frombits(u)), nil
	case TypeUint64, TypeInt64, TypeFloat64:
		u, err := r.u64("value")
		if err != nil {
			return Value{}, err
		}
		switch t {
		case TypeUint64:
			return Uint64(u), nil
		case TypeInt64:
			return Int64(int64(u)), nil
		}
		return Float64(math.Float64frombits(u)), nil
	case TypeString:
		s, err := r.str(MaxStringLength, label{"string", -1})
		if err != nil {
			return Value{}, err
		}
		return String(s), nil
	case TypeArray:
		return r.array(depth, key)
	}
	return Value{}, r.errf(at-4, "unknown metadata value type %d: %w", uint32(t), ErrInvalid)
}

func (r *reader) array(depth int, key string) (Value, error) {
	at := r.off
	if depth >= MaxArrayDepth {
		return Value{}, r.errf(at, "arrays nested deeper than %d: %w", MaxArrayDepth, ErrInvalid)
	}
	et, err := r.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, r.errf(at, "unknown array element type %d: %w", et, ErrInvalid)
	}
	n, err := r.u64("array length")
	if err != nil {
		return Value{}, err
	}
	// Smallest encoding of one element: a scalar's size, 8 bytes for a
	// string's length, 12 for a nested array's type and length.
	minSize := elem.scalarSize()
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if n > MaxArrayLength {
		return Value{}, r.errf(at, "array length %d exceeds the limit %d: %w", n, MaxArrayLength, ErrInvalid)
	}
	if n > r.remaining()/minSize {
		return Value{}, r.errf(at, "array of %d %s runs past the end of the file (%d bytes left): %w", n, elem, r.remaining(), ErrTruncated)
	}
	if sz := elem.scalarSize(); sz > 0 {
		start := r.off
		s, _ := r.bytes(n*sz, "array")
		if elem == TypeBool {
			if i := slices.IndexFunc(s, func(c byte) bool { return c > 1 }); i >= 0 {
				return Value{}, r.errf(start+uint64(i), "bool array element #%d is %d, neither 0 nor 1: %w", i, s[i], ErrInvalid)
			}
		}
		return decodeScalars(elem, s, int(n))
	}
	if elem == TypeString {
		return r.strings(int(n))
	}
	out := make([]Value, n)
	for i := range out {
		v, err := r.array(depth+1, key)
		if err != nil {
			return Value{}, err
		}
		out[i] = v
	}
	return Arrays(out), nil
}

// strings decodes an array of n strings. A first pass checks every
// length; a second copies all the bytes into one string the elements
// slice, one allocation rather than n (a vocabulary holds 100k+ tokens,
// which are kept or dropped together).
func (r *reader) strings(n int) (Value, error) {
	start, total := r.off, uint64(0)
	for i := range n {
		sl, err := r.strLen(MaxStringLength, label{"string #%d", i})
		if err != nil {
			return Value{}, err
		}
		r.off += sl
		total += sl // at most the file size
	}
	var sb strings.Builder
	sb.Grow(int(total))
	r.off = start
	for range n {
		sl := binary.LittleEndian.Uint64(r.b[r.off:])
		r.off += 8
		sb.Write(r.b[r.off : r.off+sl])
		r.off += sl
	}
	all := sb.String()
	out := make([]string, n)
	pos := uint64(0)
	r.off = start
	for i := range out {
		sl := binary.LittleEndian.Uint64(r.b[r.off:])
		r.off += 8 + sl
		out[i] = all[pos : pos+sl]
		pos += sl
	}
	return Strings(out), nil
}

func decodeScalars(elem ValueType, s []byte, n int) (Value, error) {
	le := binary.LittleEndian
	switch elem {
	case TypeUint8:
		return Uint8s(append([]uint8(nil), s...)), nil
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(s[i])
		}
		return Int8s(out), nil
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			if s[i] > 1 {
				return Value{}, fmt.Errorf("bool array element #%d is %d: %w", i, s[i], ErrInvalid)
			}
			out[i] = s[i] == 1
		}
		return Bools(out), nil
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(s[2*i:])
		}
		return Uint16s(out), nil
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(s[2*i:]))
		}
		return Int16s(out), nil
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(s[4*i:])
		}
		return Uint32s(out), nil
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(s[4*i:]))
		}
		return Int32s(out), nil
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(s[4*i:]))
		}
		return Float32s(out), nil
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(s[8*i:])
		}
		return Uint64s(out), nil
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(s[8*i:]))
		}
		return Int64s(out), nil
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(s[8*i:]))
		}
		return Float64s(out), nil
	}
	return Value{}, fmt.Errorf("array element type %s: %w", elem, ErrInvalid)
}

func (r *reader) tensorInfo(i uint64) (TensorInfo, error) {
	at := r.off
	name, err := r.str(MaxKeyLength, label{"tensor #%d name", int(i)})
	if err != nil {
		return TensorInfo{}, err
	}
	if name == "" || len(name) >= MaxTensorName || !utf8.ValidString(name) {
		return TensorInfo{}, r.errf(at, "tensor #%d: name %q is empty, not UTF-8 or %d bytes or longer: %w", i, name, MaxTensorName, ErrInvalid)
	}
	fail := func(at uint64, format string, args ...any) error {
		return r.errf(at, "tensor %q: "+format, append([]any{name}, args...)...)
	}
	at = r.off
	nd, err := r.u32("tensor dimension count")
	if err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	if nd == 0 || nd > MaxDims {
		return TensorInfo{}, fail(at, "%d dimensions (1 to %d allowed): %w", nd, MaxDims, ErrInvalid)
	}
	dims := make([]uint64, nd)
	elems := uint64(1)
	for d := range dims {
		at := r.off
		v, err := r.u64("tensor dimension")
		if err != nil {
			return TensorInfo{}, fmt.Errorf("tensor %q: %w", name, err)
		}
		if v == 0 {
			return TensorInfo{}, fail(at, "dimension %d is zero: %w", d, ErrInvalid)
		}
		hi, lo := bits.Mul64(elems, v)
		if hi != 0 || lo > MaxElements {
			return TensorInfo{}, fail(at, "dimension %d (%d) makes more than %d elements: %w", d, v, uint64(MaxElements), ErrInvalid)
		}
		dims[d], elems = v, lo
	}
	at = r.off
	tt, err := r.u32("tensor type")
	if err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	typ := Type(tt)
	ti, ok := typ.Info()
	if !ok {
		return TensorInfo{}, fail(at, "unknown ggml type id %d: %w", tt, ErrInvalid)
	}
	if dims[0]%ti.BlockSize != 0 {
		return TensorInfo{}, fail(at, "row length %d is not a multiple of the %s block size %d: %w", dims[0], ti.Name, ti.BlockSize, ErrInvalid)
	}
	off, err := r.u64("tensor offset")
	if err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	return TensorInfo{Name: name, Type: typ, Dims: dims, Offset: off, Size: elems / ti.BlockSize * ti.BlockBytes}, nil
}

// checkTensorData checks that every tensor's bytes are aligned, lie inside
// the file and do not overlap another tensor's.
func (f *File) checkTensorData() error {
	dataLen := uint64(0)
	if f.DataOffset <= f.Size {
		dataLen = f.Size - f.DataOffset
	}
	type span struct {
		start, end uint64
		name       string
	}
	spans := make([]span, 0, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%f.Alignment != 0 {
			return fmt.Errorf("tensor %q: data offset %d is not aligned to %d: %w", t.Name, t.Offset, f.Alignment, ErrInvalid)
		}
		end, carry := bits.Add64(t.Offset, t.Size, 0)
		if carry != 0 || end > dataLen {
			// Offsets are reported relative to the data section: the
			// absolute one may not fit in 64 bits.
			return fmt.Errorf("tensor %q: data offset %d + %d bytes runs past the end of the file (%d bytes of data at file offset %d): %w",
				t.Name, t.Offset, t.Size, dataLen, f.DataOffset, ErrTruncated)
		}
		spans = append(spans, span{t.Offset, end, t.Name})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return fmt.Errorf("tensor %q: data at offset %d (file offset %d) overlaps tensor %q at [%d, %d): %w",
				spans[i].name, spans[i].start, f.DataOffset+spans[i].start, spans[i-1].name, spans[i-1].start, spans[i-1].end, ErrInvalid)
		}
	}
	return nil
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }
