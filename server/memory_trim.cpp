#include "server/memory_trim.h"

#include <cstdlib>  // first: it defines __GLIBC__, which the test below needs

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace polygrad::server {

void trim_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace polygrad::server
