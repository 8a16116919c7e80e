// Registers the native routines (no Rcpp attributes, so nothing generated is committed).
#include <R.h>
#include <R_ext/Rdynload.h>
#include <Rinternals.h>

extern "C" {
SEXP pg_c_connect(SEXP, SEXP, SEXP);
SEXP pg_c_call(SEXP, SEXP, SEXP, SEXP);
SEXP pg_c_keepalive(SEXP, SEXP, SEXP);
SEXP pg_c_upload(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP pg_c_download(SEXP, SEXP, SEXP);
SEXP pg_c_stream_open(SEXP, SEXP);
SEXP pg_c_stream_submit(SEXP, SEXP, SEXP);
SEXP pg_c_stream_take(SEXP, SEXP, SEXP);
SEXP pg_c_stream_close(SEXP);
SEXP pg_c_encode(SEXP, SEXP);
SEXP pg_c_decode(SEXP, SEXP);
SEXP pg_c_spawn(SEXP, SEXP);
SEXP pg_c_alive(SEXP);
SEXP pg_c_stop(SEXP, SEXP);
SEXP pg_c_weakref(SEXP);
SEXP pg_c_weakref_get(SEXP);

// Through void (*)(void), the generic function pointer type, so the cast is not flagged.
#define CALL(f) reinterpret_cast<DL_FUNC>(reinterpret_cast<void (*)(void)>(&f))

static const R_CallMethodDef kCalls[] = {
    {"pg_c_connect", CALL(pg_c_connect), 3},
    {"pg_c_call", CALL(pg_c_call), 4},
    {"pg_c_keepalive", CALL(pg_c_keepalive), 3},
    {"pg_c_upload", CALL(pg_c_upload), 6},
    {"pg_c_download", CALL(pg_c_download), 3},
    {"pg_c_stream_open", CALL(pg_c_stream_open), 2},
    {"pg_c_stream_submit", CALL(pg_c_stream_submit), 3},
    {"pg_c_stream_take", CALL(pg_c_stream_take), 3},
    {"pg_c_stream_close", CALL(pg_c_stream_close), 1},
    {"pg_c_encode", CALL(pg_c_encode), 2},
    {"pg_c_decode", CALL(pg_c_decode), 2},
    {"pg_c_spawn", CALL(pg_c_spawn), 2},
    {"pg_c_alive", CALL(pg_c_alive), 1},
    {"pg_c_stop", CALL(pg_c_stop), 2},
    {"pg_c_weakref", CALL(pg_c_weakref), 1},
    {"pg_c_weakref_get", CALL(pg_c_weakref_get), 1},
    {nullptr, nullptr, 0}};

void R_init_polygrad(DllInfo* dll) {
  R_registerRoutines(dll, nullptr, kCalls, nullptr, nullptr);
  R_useDynamicSymbols(dll, FALSE);
}
}
