// 128-bit integers for overflow-free bound and shape arithmetic (a GCC/Clang extension, marked
// as such so -Wpedantic accepts it).
#pragma once

namespace polygrad {
__extension__ typedef __int128 i128;
}
