#include "core/ir/dtype.h"

#include <array>

namespace polygrad {
namespace {

struct DTypeInfo {
  const char* name;
  const char* c_type;
  size_t itemsize;
  char kind;
};

// Names follow numpy/tinygrad so clients can map them without a table of their own.
constexpr std::array kInfo = {
#define POLYGRAD_X(name, c, size, kind) DTypeInfo{#name, c, size, kind},
    POLYGRAD_DTYPES(POLYGRAD_X)
#undef POLYGRAD_X
};

constexpr std::array<const char*, kInfo.size()> kNames = {
    "bool",   "int8",   "int16",   "int32",    "int64",   "uint8",   "uint16",
    "uint32", "uint64", "float16", "bfloat16", "float32", "float64", "void"};

const DTypeInfo& info(DType dt) { return kInfo[static_cast<size_t>(dt)]; }

}  // namespace

const char* dtype_name(DType dt) { return kNames[static_cast<size_t>(dt)]; }
const char* dtype_c_type(DType dt) { return info(dt).c_type; }
size_t dtype_itemsize(DType dt) { return info(dt).itemsize; }
bool dtype_is_float(DType dt) { return info(dt).kind == 'f'; }
bool dtype_is_int(DType dt) { return info(dt).kind == 'i' || info(dt).kind == 'u'; }
bool dtype_is_unsigned(DType dt) { return info(dt).kind == 'u'; }

}  // namespace polygrad
