#!/bin/sh
# Build-time cost of #include <resilience/resilience.hpp> on top of an
# Asio + Beast translation unit with a trivial coroutine.
#
#   tests/bench/include_cost.sh [runs]      (default 7; CXX=g++ by default)
#
# Compiles the same TU with and without the include, at -O0 and -O2, with the
# definitions a consumer of the default build gets (RESILIENCE_DEFINES
# overrides them; RESILIENCE_INCLUDE names another copy of the headers), and
# prints the best compile time of each and the ratio.
# Time is the compiler's CPU time (user + system), the best of several runs:
# on a shared machine wall time mostly measures the neighbours, and load only
# ever adds time.
set -eu
runs=${1:-7}
cxx=${CXX:-g++}
root=$(cd "$(dirname "$0")/../.." && pwd)
include=${RESILIENCE_INCLUDE:-$root/include}  # another copy of the headers, to compare
defines=${RESILIENCE_DEFINES:--DBOOST_ASIO_SEPARATE_COMPILATION -DBOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE=16}
work=$(mktemp -d "${TMPDIR:-/tmp}/resilience-include-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT

write_tu() {  # $1: file, $2: extra include line
  cat >"$1" <<TU
#include <boost/asio.hpp>
#include <boost/beast.hpp>
$2
boost::asio::awaitable<int> answer() { co_return 42; }
int main() {
  boost::asio::io_context io;
  int v = 0;
  boost::asio::co_spawn(io, answer(), [&](std::exception_ptr, int r) { v = r; });
  io.run();
  return v == 42 ? 0 : 1;
}
TU
}
write_tu "$work/base.cpp" ""
write_tu "$work/with.cpp" "#include <resilience/resilience.hpp>"

compile() {  # $1: source, $2: -O level; prints the CPU seconds
  # shellcheck disable=SC2086
  /usr/bin/time -f '%U + %S' -o "$work/t" "$cxx" -std=c++20 "$2" $defines -I"$include" \
    -c "$1" -o "$work/out.o"
  tail -n1 "$work/t" | bc
}
min() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc)" = 1 ]; then echo "$2"; else echo "$1"; fi; }

echo "compiler: $($cxx --version | head -n1); best of $runs runs"
echo "defines:  $defines"
for opt in -O0 -O2; do
  base="" with=""
  i=0
  while [ "$i" -lt "$runs" ]; do  # interleaved: both see the same neighbours
    base=$(min "$base" "$(compile "$work/base.cpp" "$opt")")
    with=$(min "$with" "$(compile "$work/with.cpp" "$opt")")
    i=$((i + 1))
  done
  pct=$(echo "scale=1; ($with - $base) * 100 / $base" | bc)
  printf '%s  asio+beast %6.2fs  + resilience.hpp %6.2fs  cost %+5.1f%%\n' "$opt" "$base" "$with" "$pct"
done
