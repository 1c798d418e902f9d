#!/bin/sh
# sh pkg_config_core.sh PKG_CONFIG OUTPUT CXX [compiler flags...]
# The core-only consumer (core_main.cpp) built with exactly what
# `pkg-config --cflags --libs resilience-core` prints, from the copy
# PKG_CONFIG_PATH names, then run. Fails if those flags name OpenSSL or the
# HTTP library. With EXPECT_HTTP=ON (the copy has the HTTP library), the
# control: resilience-http's must name -lssl.
set -eu
pkg_config=$1 out=$2 cxx=$3
shift 3
here=$(dirname "$0")

cflags=$("$pkg_config" --cflags resilience-core)
libs=$("$pkg_config" --libs resilience-core)
echo "pkg-config --libs resilience-core: $libs"
case " $cflags $libs " in
  *ssl* | *crypto* | *resilience_http*)
    echo "resilience-core.pc names OpenSSL or the HTTP library: $cflags $libs" >&2
    exit 1 ;;
esac
if [ "${EXPECT_HTTP:-OFF}" = ON ]; then
  http_libs=$("$pkg_config" --libs resilience-http)
  case " $http_libs " in
    *" -lssl "*) ;;
    *) echo "control: pkg-config --libs resilience-http names no -lssl: $http_libs" >&2
       exit 1 ;;
  esac
fi

# $cflags and $libs unquoted: each is a list of flags.
set -x
"$cxx" "$@" "$here/core_main.cpp" $cflags $libs -o "$out"
"$out"
