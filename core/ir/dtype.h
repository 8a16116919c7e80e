// Element types. float32 is the default; tinygrad's promotion lattice lives in frontend/.
#pragma once

#include <cstddef>
#include <cstdint>

namespace polygrad {

// X(name, storage c_type, itemsize, kind); 16-bit floats are stored as their bits and computed in
// float by the renderers.
// X(name, c_type, itemsize, kind) — kind: 'b' bool, 'i' signed, 'u' unsigned, 'f' float.
// `void` is the type of statements (STORE, SINK) and is never a tensor's dtype.
#define POLYGRAD_DTYPES(X)              \
  X(Bool, "_Bool", 1, 'b')              \
  X(Int8, "int8_t", 1, 'i')             \
  X(Int16, "int16_t", 2, 'i')           \
  X(Int32, "int32_t", 4, 'i')           \
  X(Int64, "int64_t", 8, 'i')           \
  X(UInt8, "uint8_t", 1, 'u')           \
  X(UInt16, "uint16_t", 2, 'u')         \
  X(UInt32, "uint32_t", 4, 'u')         \
  X(UInt64, "uint64_t", 8, 'u')         \
  X(Float16, "uint16_t", 2, 'f')        \
  X(BFloat16, "uint16_t", 2, 'f')       \
  X(Float32, "float", 4, 'f')           \
  X(Float64, "double", 8, 'f')          \
  X(Void, "void", 0, 'v')

enum class DType : uint8_t {
#define POLYGRAD_X(name, c, size, kind) name,
  POLYGRAD_DTYPES(POLYGRAD_X)
#undef POLYGRAD_X
};

// Integer index arithmetic inside kernels is done in this type.
inline constexpr DType kIndexDType = DType::Int64;

const char* dtype_name(DType dt);   // "float32", "int64", ...
const char* dtype_c_type(DType dt); // "float", "int64_t", ...
size_t dtype_itemsize(DType dt);
bool dtype_is_float(DType dt);
bool dtype_is_int(DType dt);       // signed or unsigned integer, not bool
bool dtype_is_unsigned(DType dt);

}  // namespace polygrad
