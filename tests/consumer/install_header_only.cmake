# cmake -DSOURCE=... -DBUILD=... -DPREFIX=... -DGENERATOR=... -DCXX=...
#       -DBUILD_TYPE=... -P install_header_only.cmake
#
# A library-only build and install: no tests, samples or benchmarks (Google
# Benchmark hidden, to prove it is not needed), Asio left to the program
# (RESILIENCE_ASIO_SEPARATE_COMPILATION=OFF) and Asio's own cache size
# (RESILIENCE_ASIO_FRAME_CACHE=0). At -O0 whatever the build type: what is
# checked is that it builds, installs and links, and the optimiser would
# only make that slower (NDEBUG kept as the build type has it). A unity
# build: with Asio header-only, each file would parse all of Asio's code.
# The core component alone: what a header-only Asio changes is the same for
# the HTTP library, whose build would double the test's time (the package
# tests with Asio compiled in the library check every component).
string(TOUPPER "${BUILD_TYPE}" config)
set(unoptimized "-O0")
if(BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
  set(unoptimized "-O0 -DNDEBUG")
endif()
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE};-B;${BUILD};-G;${GENERATOR};-DCMAKE_CXX_COMPILER=${CXX};-DCMAKE_BUILD_TYPE=${BUILD_TYPE};-DCMAKE_CXX_FLAGS_${config}=${unoptimized};-DCMAKE_INSTALL_PREFIX=${PREFIX};-DRESILIENCE_BUILD_TESTS=OFF;-DRESILIENCE_BUILD_SAMPLES=OFF;-DRESILIENCE_BUILD_BENCHMARKS=OFF;-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON;-DRESILIENCE_ASIO_SEPARATE_COMPILATION=OFF;-DRESILIENCE_ASIO_FRAME_CACHE=0;-DCMAKE_UNITY_BUILD=ON;-DRESILIENCE_WITH_HTTP=OFF;-DRESILIENCE_WITH_REDIS=OFF"
    "${CMAKE_COMMAND};--build;${BUILD};--parallel;2"
    "${CMAKE_COMMAND};--install;${BUILD}")
  execute_process(COMMAND ${step} RESULT_VARIABLE failed)
  if(failed)
    list(JOIN step " " command)
    message(FATAL_ERROR "failed (${failed}): ${command}")
  endif()
endforeach()
