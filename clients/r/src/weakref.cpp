// Weak references for R code (base R has none at the R level): the node table keeps the tensors
// that require gradients without keeping them alive, as the Python client's WeakIdSet does.
#include <Rinternals.h>

extern "C" SEXP pg_c_weakref(SEXP obj) { return R_MakeWeakRef(obj, R_NilValue, R_NilValue, FALSE); }

// The referent, or NULL once it was garbage collected.
extern "C" SEXP pg_c_weakref_get(SEXP ref) { return R_WeakRefKey(ref); }
