// Registers the native routines (no Rcpp attributes, so nothing generated is committed).
#include <R.h>
#include <R_ext/Rdynload.h>
#include <Rinternals.h>

extern "C" {
SEXP pg_c_connect(SEXP, SEXP, SEXP);
SEXP pg_c_wait_connected(SEXP, SEXP);
SEXP pg_c_call(SEXP, SEXP, SEXP, SEXP);
SEXP pg_c_upload(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP pg_c_download(SEXP, SEXP, SEXP);
SEXP pg_c_encode(SEXP, SEXP);
SEXP pg_c_decode(SEXP, SEXP);
SEXP pg_c_spawn(SEXP, SEXP);
SEXP pg_c_alive(SEXP);
SEXP pg_c_stop(SEXP, SEXP);
SEXP pg_c_weakref(SEXP);
SEXP pg_c_weakref_get(SEXP);

static const R_CallMethodDef kCalls[] = {
    {"pg_c_connect", (DL_FUNC)&pg_c_connect, 3},
    {"pg_c_wait_connected", (DL_FUNC)&pg_c_wait_connected, 2},
    {"pg_c_call", (DL_FUNC)&pg_c_call, 4},
    {"pg_c_upload", (DL_FUNC)&pg_c_upload, 6},
    {"pg_c_download", (DL_FUNC)&pg_c_download, 3},
    {"pg_c_encode", (DL_FUNC)&pg_c_encode, 2},
    {"pg_c_decode", (DL_FUNC)&pg_c_decode, 2},
    {"pg_c_spawn", (DL_FUNC)&pg_c_spawn, 2},
    {"pg_c_alive", (DL_FUNC)&pg_c_alive, 1},
    {"pg_c_stop", (DL_FUNC)&pg_c_stop, 2},
    {"pg_c_weakref", (DL_FUNC)&pg_c_weakref, 1},
    {"pg_c_weakref_get", (DL_FUNC)&pg_c_weakref_get, 1},
    {nullptr, nullptr, 0}};

void R_init_polygrad(DllInfo* dll) {
  R_registerRoutines(dll, nullptr, kCalls, nullptr, nullptr);
  R_useDynamicSymbols(dll, FALSE);
}
}
