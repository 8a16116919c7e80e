#!/usr/bin/env bash
# Packs a built daemon for a GPU machine that has CUDA and Python but not this machine's
# libraries (the device tool's machines: no apt, another distribution):
#
#   tests/gpu/bundle.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, .gpu)
#
# OUT_DIR gets the stripped binary, the shared libraries it links beyond glibc and libstdc++, and
# a launcher `polygradd` that starts it through the dynamic loader with --library-path, so the
# libraries reach the daemon alone: the C compiler it spawns for CPU kernels keeps the machine's
# own (an inherited LD_LIBRARY_PATH would hand it these older ones). Then, there:
#   POLYGRAD_DAEMON=$PWD/.gpu/polygradd POLYGRAD_PYTHON=python3 tests/gpu/run.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build}
out=${2:-.gpu}
cd "$root"
[[ -x "$build/polygradd" ]] || { echo "bundle.sh: $build/polygradd is not built" >&2; exit 1; }
rm -rf "$out/lib" "$out/polygradd" "$out/polygradd.bin"
mkdir -p "$out/lib"
strip -o "$out/polygradd.bin" "$build/polygradd"
# glibc's own libraries and the C++ runtime stay the machine's: the loader must match its glibc,
# and a newer libstdc++ serves an older binary.
ldd "$build/polygradd" | awk '/=> \//{print $3}' |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
loader=$(ldd "$build/polygradd" | awk '/ld-linux/{print $1}')
cat >"$out/polygradd" <<LAUNCH
#!/bin/sh
here=\$(dirname "\$(readlink -f "\$0")")
exec $loader --library-path "\$here/lib" "\$here/polygradd.bin" "\$@"
LAUNCH
chmod +x "$out/polygradd"
du -sh "$out"
