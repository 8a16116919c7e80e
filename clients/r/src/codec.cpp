// Element conversion between R vectors and the wire's little-endian bytes, one dtype at a time.
// Ordering (R's column-major vs the wire's row-major) is the R side's job (aperm); this file
// only converts values, with the same rounding as the Python client (numpy's casts).
#include <Rcpp.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

enum Wire { BOOL = 1, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 };

int itemsize(int dt) {
  switch (dt) {
    case BOOL: case INT8: case UINT8: return 1;
    case INT16: case UINT16: case FLOAT16: case BFLOAT16: return 2;
    case INT32: case UINT32: case FLOAT32: return 4;
    case INT64: case UINT64: case FLOAT64: return 8;
  }
  Rcpp::stop("polygrad: unknown wire dtype %d", dt);
}

// float32 -> bfloat16 bits, round to nearest even, NaN as 0x7FC0 (the Python client's rule).
uint16_t to_bf16(float f) {
  if (std::isnan(f)) return 0x7FC0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((static_cast<uint64_t>(u) + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
void put(unsigned char* out, R_xlen_t i, T v) {
  std::memcpy(out + i * static_cast<R_xlen_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T>
T get(const unsigned char* in, R_xlen_t i) {
  T v;
  std::memcpy(&v, in + i * static_cast<R_xlen_t>(sizeof(T)), sizeof(T));
  return v;
}

// A float to an integer type as numpy's astype does on x86 for values in range (truncation).
template <typename T>
T trunc_to(double x) {
  if (std::isnan(x)) return 0;
  return static_cast<T>(static_cast<int64_t>(x));
}

}  // namespace

// pg_c_encode(x, dtype): x (double, integer or logical) as the wire bytes of `dtype`.
extern "C" SEXP pg_c_encode(SEXP x, SEXP dtype) {
  BEGIN_RCPP
  int dt = Rcpp::as<int>(dtype);
  R_xlen_t n = Rf_xlength(x);
  Rcpp::RawVector out(n * itemsize(dt));
  unsigned char* o = n ? &out[0] : nullptr;
  bool is_int = TYPEOF(x) == INTSXP || TYPEOF(x) == LGLSXP;
  if (!is_int && TYPEOF(x) != REALSXP) Rcpp::stop("polygrad: cannot encode an R %s vector", Rf_type2char(TYPEOF(x)));
  const int* xi = is_int ? INTEGER(x) : nullptr;
  const double* xd = is_int ? nullptr : REAL(x);
  for (R_xlen_t i = 0; i < n; ++i) {
    double d = is_int ? static_cast<double>(xi[i]) : xd[i];
    int64_t k = is_int ? xi[i] : 0;
    switch (dt) {
      case BOOL: put<uint8_t>(o, i, d != 0 ? 1 : 0); break;
      case INT8: put<int8_t>(o, i, is_int ? static_cast<int8_t>(k) : trunc_to<int8_t>(d)); break;
      case INT16: put<int16_t>(o, i, is_int ? static_cast<int16_t>(k) : trunc_to<int16_t>(d)); break;
      case INT32: put<int32_t>(o, i, is_int ? static_cast<int32_t>(k) : trunc_to<int32_t>(d)); break;
      case INT64: put<int64_t>(o, i, is_int ? k : trunc_to<int64_t>(d)); break;
      case UINT8: put<uint8_t>(o, i, is_int ? static_cast<uint8_t>(k) : trunc_to<uint8_t>(d)); break;
      case UINT16: put<uint16_t>(o, i, is_int ? static_cast<uint16_t>(k) : trunc_to<uint16_t>(d)); break;
      case UINT32: put<uint32_t>(o, i, is_int ? static_cast<uint32_t>(k) : trunc_to<uint32_t>(d)); break;
      case UINT64:
        put<uint64_t>(o, i, is_int ? static_cast<uint64_t>(k)
                                   : (d >= 9223372036854775808.0 ? static_cast<uint64_t>(d) : trunc_to<uint64_t>(d)));
        break;
      case FLOAT16: put<_Float16>(o, i, static_cast<_Float16>(d)); break;  // one rounding, as numpy
      case BFLOAT16: put<uint16_t>(o, i, to_bf16(static_cast<float>(d))); break;
      case FLOAT32: put<float>(o, i, static_cast<float>(d)); break;
      case FLOAT64: put<double>(o, i, d); break;
    }
  }
  return out;
  END_RCPP
}

// pg_c_decode(raw, dtype): bool -> logical; int8/16/32, uint8/16 -> integer; others -> double.
extern "C" SEXP pg_c_decode(SEXP raw, SEXP dtype) {
  BEGIN_RCPP
  int dt = Rcpp::as<int>(dtype);
  R_xlen_t n = Rf_xlength(raw) / itemsize(dt);
  const unsigned char* in = RAW(raw);
  switch (dt) {
    case BOOL: {
      Rcpp::LogicalVector out(n);
      for (R_xlen_t i = 0; i < n; ++i) out[i] = in[i] != 0;
      return out;
    }
    case INT8: case INT16: case INT32: case UINT8: case UINT16: {
      Rcpp::IntegerVector out(n);
      for (R_xlen_t i = 0; i < n; ++i) {
        switch (dt) {
          case INT8: out[i] = get<int8_t>(in, i); break;
          case INT16: out[i] = get<int16_t>(in, i); break;
          case INT32: out[i] = get<int32_t>(in, i); break;
          case UINT8: out[i] = get<uint8_t>(in, i); break;
          default: out[i] = get<uint16_t>(in, i); break;
        }
      }
      return out;
    }
    default: {
      Rcpp::NumericVector out(n);
      for (R_xlen_t i = 0; i < n; ++i) {
        switch (dt) {
          case INT64: out[i] = static_cast<double>(get<int64_t>(in, i)); break;
          case UINT32: out[i] = get<uint32_t>(in, i); break;
          case UINT64: out[i] = static_cast<double>(get<uint64_t>(in, i)); break;
          case FLOAT16: out[i] = static_cast<double>(get<_Float16>(in, i)); break;
          case BFLOAT16: out[i] = from_bf16(get<uint16_t>(in, i)); break;
          case FLOAT32: out[i] = get<float>(in, i); break;
          default: out[i] = get<double>(in, i); break;
        }
      }
      return out;
    }
  }
  END_RCPP
}
