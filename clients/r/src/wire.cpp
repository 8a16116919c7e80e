// See wire.h. Runs on R's main thread only (it allocates R objects).
#include "wire.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace polygrad_r {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Fields holding daemon-chosen 62-bit values: exact only as strings in R.
bool is_big_id(const FieldDescriptor* f) {
  const std::string& n = f->name();
  return n == "handle" || n == "handles" || n == "step_id" || n == "target_handle";
}

uint64_t to_u64(SEXP v, R_xlen_t i, const std::string& field) {
  if (TYPEOF(v) == STRSXP) return std::stoull(CHAR(STRING_ELT(v, i)));
  if (TYPEOF(v) == INTSXP) return static_cast<uint64_t>(INTEGER(v)[i]);
  if (TYPEOF(v) == REALSXP) return static_cast<uint64_t>(REAL(v)[i]);
  throw std::invalid_argument("field " + field + ": expected a number or decimal string");
}

double to_dbl(SEXP v, R_xlen_t i) {
  if (TYPEOF(v) == INTSXP) return INTEGER(v)[i];
  if (TYPEOF(v) == LGLSXP) return LOGICAL(v)[i];
  return REAL(Rf_coerceVector(v, REALSXP))[i];
}

void set_field(Message* msg, const FieldDescriptor* f, SEXP v) {
  const Reflection* r = msg->GetReflection();
  const std::string& name = f->name();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    if (!f->is_repeated()) {
      list_to_message(v, r->MutableMessage(msg, f));
      return;
    }
    for (R_xlen_t i = 0; i < Rf_xlength(v); ++i) list_to_message(VECTOR_ELT(v, i), r->AddMessage(msg, f));
    return;
  }
  if (f->type() == FieldDescriptor::TYPE_BYTES) {
    if (TYPEOF(v) != RAWSXP) throw std::invalid_argument("field " + name + ": expected a raw vector");
    std::string bytes(reinterpret_cast<const char*>(RAW(v)), static_cast<size_t>(Rf_xlength(v)));
    r->SetString(msg, f, std::move(bytes));
    return;
  }
  PROTECT(v = (TYPEOF(v) == STRSXP || TYPEOF(v) == INTSXP || TYPEOF(v) == LGLSXP) ? v : Rf_coerceVector(v, REALSXP));
  R_xlen_t n = Rf_xlength(v);
  if (!f->is_repeated() && n != 1) {
    UNPROTECT(1);
    throw std::invalid_argument("field " + name + ": expected one value, got " + std::to_string(n));
  }
  for (R_xlen_t i = 0; i < n; ++i) {
    bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: {
        if (TYPEOF(v) != STRSXP) throw std::invalid_argument("field " + name + ": expected a string");
        std::string s = CHAR(STRING_ELT(v, i));
        rep ? r->AddString(msg, f, s) : r->SetString(msg, f, s);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        uint64_t u = to_u64(v, i, name);
        rep ? r->AddUInt64(msg, f, u) : r->SetUInt64(msg, f, u);
        break;
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        auto x = static_cast<int64_t>(to_dbl(v, i));
        rep ? r->AddInt64(msg, f, x) : r->SetInt64(msg, f, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT32: {
        auto x = static_cast<uint32_t>(to_dbl(v, i));
        rep ? r->AddUInt32(msg, f, x) : r->SetUInt32(msg, f, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_INT32: {
        auto x = static_cast<int32_t>(to_dbl(v, i));
        rep ? r->AddInt32(msg, f, x) : r->SetInt32(msg, f, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        double x = to_dbl(v, i);
        rep ? r->AddDouble(msg, f, x) : r->SetDouble(msg, f, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_FLOAT: {
        auto x = static_cast<float>(to_dbl(v, i));
        rep ? r->AddFloat(msg, f, x) : r->SetFloat(msg, f, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        bool x = to_dbl(v, i) != 0;
        rep ? r->AddBool(msg, f, x) : r->SetBool(msg, f, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        auto x = static_cast<int>(to_dbl(v, i));
        rep ? r->AddEnumValue(msg, f, x) : r->SetEnumValue(msg, f, x);
        break;
      }
      default:
        UNPROTECT(1);
        throw std::invalid_argument("field " + name + ": unsupported type");
    }
  }
  UNPROTECT(1);
}

SEXP u64_value(uint64_t u, bool big) {
  return big ? Rf_mkString(std::to_string(u).c_str()) : Rf_ScalarReal(static_cast<double>(u));
}

SEXP field_value(const Message& msg, const FieldDescriptor* f) {
  const Reflection* r = msg.GetReflection();
  bool big = is_big_id(f);
  if (!f->is_repeated()) {
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: return message_to_list(r->GetMessage(msg, f));
      case FieldDescriptor::CPPTYPE_STRING: {
        std::string s = r->GetString(msg, f);
        if (f->type() == FieldDescriptor::TYPE_BYTES) {
          SEXP raw = Rf_allocVector(RAWSXP, static_cast<R_xlen_t>(s.size()));
          if (!s.empty()) memcpy(RAW(raw), s.data(), s.size());
          return raw;
        }
        return Rf_mkString(s.c_str());
      }
      case FieldDescriptor::CPPTYPE_UINT64: return u64_value(r->GetUInt64(msg, f), big);
      case FieldDescriptor::CPPTYPE_INT64: return Rf_ScalarReal(static_cast<double>(r->GetInt64(msg, f)));
      case FieldDescriptor::CPPTYPE_UINT32: return Rf_ScalarReal(r->GetUInt32(msg, f));
      case FieldDescriptor::CPPTYPE_INT32: return Rf_ScalarReal(r->GetInt32(msg, f));
      case FieldDescriptor::CPPTYPE_DOUBLE: return Rf_ScalarReal(r->GetDouble(msg, f));
      case FieldDescriptor::CPPTYPE_FLOAT: return Rf_ScalarReal(r->GetFloat(msg, f));
      case FieldDescriptor::CPPTYPE_BOOL: return Rf_ScalarLogical(r->GetBool(msg, f));
      case FieldDescriptor::CPPTYPE_ENUM: return Rf_ScalarReal(r->GetEnumValue(msg, f));
    }
    return R_NilValue;
  }
  int n = r->FieldSize(msg, f);
  SEXP out;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      out = PROTECT(Rf_allocVector(VECSXP, n));
      for (int i = 0; i < n; ++i) SET_VECTOR_ELT(out, i, message_to_list(r->GetRepeatedMessage(msg, f, i)));
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      out = PROTECT(Rf_allocVector(STRSXP, n));
      for (int i = 0; i < n; ++i) SET_STRING_ELT(out, i, Rf_mkChar(r->GetRepeatedString(msg, f, i).c_str()));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out = PROTECT(Rf_allocVector(LGLSXP, n));
      for (int i = 0; i < n; ++i) LOGICAL(out)[i] = r->GetRepeatedBool(msg, f, i);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      if (big) {
        out = PROTECT(Rf_allocVector(STRSXP, n));
        for (int i = 0; i < n; ++i)
          SET_STRING_ELT(out, i, Rf_mkChar(std::to_string(r->GetRepeatedUInt64(msg, f, i)).c_str()));
        break;
      }
      out = PROTECT(Rf_allocVector(REALSXP, n));
      for (int i = 0; i < n; ++i) REAL(out)[i] = static_cast<double>(r->GetRepeatedUInt64(msg, f, i));
      break;
    default:
      out = PROTECT(Rf_allocVector(REALSXP, n));
      for (int i = 0; i < n; ++i) {
        double x = 0;
        switch (f->cpp_type()) {
          case FieldDescriptor::CPPTYPE_INT64: x = static_cast<double>(r->GetRepeatedInt64(msg, f, i)); break;
          case FieldDescriptor::CPPTYPE_INT32: x = r->GetRepeatedInt32(msg, f, i); break;
          case FieldDescriptor::CPPTYPE_UINT32: x = r->GetRepeatedUInt32(msg, f, i); break;
          case FieldDescriptor::CPPTYPE_DOUBLE: x = r->GetRepeatedDouble(msg, f, i); break;
          case FieldDescriptor::CPPTYPE_FLOAT: x = r->GetRepeatedFloat(msg, f, i); break;
          case FieldDescriptor::CPPTYPE_ENUM: x = r->GetRepeatedEnumValue(msg, f, i); break;
          default: break;
        }
        REAL(out)[i] = x;
      }
  }
  UNPROTECT(1);
  return out;
}

}  // namespace

void list_to_message(SEXP list, Message* msg) {
  if (TYPEOF(list) != VECSXP) throw std::invalid_argument(msg->GetTypeName() + ": expected a named list");
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  R_xlen_t n = Rf_xlength(list);
  if (n > 0 && names == R_NilValue) throw std::invalid_argument(msg->GetTypeName() + ": expected a named list");
  for (R_xlen_t i = 0; i < n; ++i) {
    std::string name = CHAR(STRING_ELT(names, i));
    const FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(name);
    if (f == nullptr) throw std::invalid_argument(msg->GetTypeName() + " has no field " + name);
    SEXP v = VECTOR_ELT(list, i);
    if (v == R_NilValue) continue;  // unset, as in R's list(a = NULL) idiom
    set_field(msg, f, v);
  }
}

SEXP message_to_list(const Message& msg) {
  const Reflection* r = msg.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(msg, &fields);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(fields.size())));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(fields.size())));
  for (size_t i = 0; i < fields.size(); ++i) {
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), field_value(msg, fields[i]));
    SET_STRING_ELT(names, static_cast<R_xlen_t>(i), Rf_mkChar(fields[i]->name().c_str()));
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

}  // namespace polygrad_r
