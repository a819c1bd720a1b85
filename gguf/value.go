package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a GGUF metadata value.
type ValueType uint32

const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// scalarSize is the encoded size of a fixed-size scalar, 0 for string and array.
func (t ValueType) scalarSize() uint64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// Value is one metadata value. Scalars are held in their Go type
// (uint8 … float64, bool, string); arrays as a typed slice ([]uint8 …
// []float64, []bool, []string), or []Value for arrays of arrays.
type Value struct {
	Type ValueType
	// Elem is the element type when Type is TypeArray.
	Elem ValueType
	v    any
}

// Scalar and array constructors, used by the writer and by tests.
func Uint8(v uint8) Value     { return Value{Type: TypeUint8, v: v} }
func Int8(v int8) Value       { return Value{Type: TypeInt8, v: v} }
func Uint16(v uint16) Value   { return Value{Type: TypeUint16, v: v} }
func Int16(v int16) Value     { return Value{Type: TypeInt16, v: v} }
func Uint32(v uint32) Value   { return Value{Type: TypeUint32, v: v} }
func Int32(v int32) Value     { return Value{Type: TypeInt32, v: v} }
func Float32(v float32) Value { return Value{Type: TypeFloat32, v: v} }
func Bool(v bool) Value       { return Value{Type: TypeBool, v: v} }
func String(v string) Value   { return Value{Type: TypeString, v: v} }
func Uint64(v uint64) Value   { return Value{Type: TypeUint64, v: v} }
func Int64(v int64) Value     { return Value{Type: TypeInt64, v: v} }
func Float64(v float64) Value { return Value{Type: TypeFloat64, v: v} }

func Uint8s(v []uint8) Value     { return arr(TypeUint8, v) }
func Int8s(v []int8) Value       { return arr(TypeInt8, v) }
func Uint16s(v []uint16) Value   { return arr(TypeUint16, v) }
func Int16s(v []int16) Value     { return arr(TypeInt16, v) }
func Uint32s(v []uint32) Value   { return arr(TypeUint32, v) }
func Int32s(v []int32) Value     { return arr(TypeInt32, v) }
func Float32s(v []float32) Value { return arr(TypeFloat32, v) }
func Bools(v []bool) Value       { return arr(TypeBool, v) }
func Strings(v []string) Value   { return arr(TypeString, v) }
func Uint64s(v []uint64) Value   { return arr(TypeUint64, v) }
func Int64s(v []int64) Value     { return arr(TypeInt64, v) }
func Float64s(v []float64) Value { return arr(TypeFloat64, v) }

// Arrays is an array of arrays (element type TypeArray).
func Arrays(v []Value) Value { return arr(TypeArray, v) }

func arr(elem ValueType, v any) Value { return Value{Type: TypeArray, Elem: elem, v: v} }

// Raw returns the Go value held.
func (v Value) Raw() any { return v.v }

// Len is the element count of an array (0 for a scalar).
func (v Value) Len() int {
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// Int returns an integer scalar of any width (bools as 0/1) as int64.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// Float returns a numeric scalar as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.Int(); ok && v.Type != TypeBool {
		return float64(i), true
	}
	return 0, false
}

// Str returns a string scalar.
func (v Value) Str() (string, bool) { s, ok := v.v.(string); return s, ok }

// BoolValue returns a bool scalar.
func (v Value) BoolValue() (bool, bool) { b, ok := v.v.(bool); return b, ok }

// StringSlice returns an array of strings.
func (v Value) StringSlice() ([]string, bool) { s, ok := v.v.([]string); return s, ok }

// Float32Slice returns an array of float32.
func (v Value) Float32Slice() ([]float32, bool) { s, ok := v.v.([]float32); return s, ok }

// Int32Slice returns an integer array of any width as int32, converting
// when the stored width differs; false if a value does not fit.
func (v Value) Int32Slice() ([]int32, bool) {
	switch a := v.v.(type) {
	case []int32:
		return a, true
	case []uint8:
		return convInts(a)
	case []int8:
		return convInts(a)
	case []uint16:
		return convInts(a)
	case []int16:
		return convInts(a)
	case []uint32:
		return convInts(a)
	case []uint64:
		return convInts(a)
	case []int64:
		return convInts(a)
	}
	return nil, false
}

func convInts[T uint8 | int8 | uint16 | int16 | uint32 | uint64 | int64](a []T) ([]int32, bool) {
	out := make([]int32, len(a))
	for i, x := range a {
		if int64(x) < math.MinInt32 || int64(x) > math.MaxInt32 || (x > 0 && uint64(x) > math.MaxInt32) {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

func (v Value) String() string {
	if v.Type == TypeArray {
		return fmt.Sprintf("[%s × %d]", v.Elem, v.Len())
	}
	if s, ok := v.v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v.v)
}

// KV is one metadata entry, in file order.
type KV struct {
	Key   string
	Value Value
}
