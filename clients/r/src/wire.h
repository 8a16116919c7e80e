// R lists <-> protobuf messages, by field name through protobuf reflection, so the R code writes
// requests as nested named lists and the C++ side needs no per-message code.
#pragma once

#include <Rinternals.h>
#include <google/protobuf/message.h>

namespace polygrad_r {

// Fills `msg` from a named list: scalars and vectors for singular and repeated scalar fields, raw
// vectors for bytes, nested lists for messages (an unnamed list of them for repeated ones).
// uint64 fields accept numbers or decimal strings (handles are 62-bit and do not fit a double).
// Throws std::invalid_argument naming the field on a name or type the message does not have.
void list_to_message(SEXP list, google::protobuf::Message* msg);

// The message as a named list of the fields that are set. uint64 fields that name daemon handles
// or steps (random 62-bit values) come back as decimal strings, other integers as doubles.
SEXP message_to_list(const google::protobuf::Message& msg);

}  // namespace polygrad_r
