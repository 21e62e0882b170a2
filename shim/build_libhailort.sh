#!/usr/bin/env bash
# Build libhailort from source (Linux) with every external dependency supplied by the caller,
# then link loop's shim against it. Downloads nothing: CMake runs fully disconnected.
#
#   shim/build_libhailort.sh HAILORT_SRC DEPS_DIR [BUILD_DIR]
#
# HAILORT_SRC  an extracted hailo-ai/hailort tree (e.g. tag v5.2.0): holds CMakeLists.txt and hailort/
# DEPS_DIR     one extracted source tree per dependency named in hailort/cmake/external/*.cmake,
#              in folders named after the FetchContent names: protobuf spdlog readerwriterqueue
#              xxhash eigen json minja cli11 dotwriter (shim/README.md lists repositories and commits)
# BUILD_DIR    default: HAILORT_SRC/build-loop
#
# JOBS (default 2) caps parallel compiles, protoc's too where ninja is installed; all runs under nice -n 19.
# Output: BUILD_DIR/hailort/libhailort/src/libhailort.so.<version> and BUILD_DIR/loop-shim/libhailort_shim.so;
# then run the linked test with LOOP_HAILORT_LIB=BUILD_DIR/loop-shim/libhailort_shim.so.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
SRC=$(cd "$1" && pwd)
DEPS=$(cd "$2" && pwd)
BUILD=${3:-$SRC/build-loop}
JOBS=${JOBS:-2}
SHIM_DIR=$(cd "$(dirname "$0")" && pwd)
DEP_NAMES=(protobuf spdlog readerwriterqueue xxhash eigen json minja cli11 dotwriter)

[ -f "$SRC/hailort/CMakeLists.txt" ] || { echo "not a hailort source tree: $SRC" >&2; exit 2; }
missing=()
for name in "${DEP_NAMES[@]}"; do [ -d "$DEPS/$name" ] || missing+=("$name"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "missing under $DEPS: ${missing[*]} (see shim/README.md for the repository and commit of each)" >&2
    exit 2
fi

# protobuf.cmake builds protoc at configure time from the fixed path hailort/external/protobuf-src,
# whatever FETCHCONTENT_SOURCE_DIR_PROTOBUF says, so the supplied tree must also appear there.
mkdir -p "$SRC/hailort/external"
ln -sfn "$DEPS/protobuf" "$SRC/hailort/external/protobuf-src"

# HailoRT builds protoc while it configures (protobuf.cmake calls execute_cmake, cmake/execute_cmake.cmake)
# under `env -i` with a fixed PATH, so neither MAKEFLAGS nor CMAKE_BUILD_PARALLEL_LEVEL reaches that
# build, and under "Unix Makefiles" it appends `-j` of every processor in /proc/cpuinfo after all else.
# Under Ninja it appends nothing and hands protobuf.cmake's CMAKE_EXTRA_BUILD_ARGS to `cmake --build`,
# so JOBS gets through. Its own configure finds ninja on that fixed PATH only, and a build folder keeps
# the generator it was first configured with.
CLEAN_PATH=/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin
generator=()
if env -i PATH="$CLEAN_PATH" sh -c 'command -v ninja' >/dev/null 2>&1 \
    && { [ ! -f "$BUILD/CMakeCache.txt" ] || grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD/CMakeCache.txt"; }; then
    generator=(-G Ninja "-DCMAKE_EXTRA_BUILD_ARGS=--parallel;$JOBS")
else
    echo "note: no ninja in $CLEAN_PATH (or $BUILD was configured with make): HailoRT's configure-time" \
        "protoc build will use all $(grep -c ^processor /proc/cpuinfo) processors, whatever JOBS says (niced)" >&2
fi

fetch_args=(-DFETCHCONTENT_FULLY_DISCONNECTED=ON)
for name in "${DEP_NAMES[@]}"; do
    fetch_args+=("-DFETCHCONTENT_SOURCE_DIR_${name^^}=$DEPS/$name")
done

nice -n 19 cmake -S "$SRC" -B "$BUILD" ${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=Release \
    -DHAILO_BUILD_TOOLS=OFF -DHAILO_BUILD_EXAMPLES=OFF -DHAILO_BUILD_UT=OFF -DHAILO_BUILD_GSTREAMER=OFF \
    -DHAILO_BUILD_HAILORT_SERVER=OFF -DHAILO_BUILD_GENAI_SERVER=OFF -DHAILO_BUILD_CLIENT_TOKENIZER=OFF \
    -DHAILO_BUILD_PYHAILORT_INTERNAL=OFF -DHAILO_BUILD_DOC=OFF -DENABLE_PERFETTO=OFF \
    "${fetch_args[@]}"
nice -n 19 cmake --build "$BUILD" --target libhailort -j "$JOBS"

LIB_DIR="$BUILD/hailort/libhailort/src"
LIB=$(ls "$LIB_DIR"/libhailort.so.* | head -n 1)
mkdir -p "$BUILD/loop-shim"
# -DNOMINMAX mirrors the Windows build (CMakeLists.txt); harmless on Linux.
nice -n 19 g++ -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -DNOMINMAX -Wall -Wextra \
    -I"$SRC/hailort/libhailort/include" -o "$BUILD/loop-shim/libhailort_shim.so" \
    "$SHIM_DIR/hailort_shim.cpp" "$LIB" -Wl,-rpath,"$LIB_DIR"
cp "$SHIM_DIR/hailort_shim.sigs" "$BUILD/loop-shim/"
echo "libhailort: $LIB"
echo "shim:       $BUILD/loop-shim/libhailort_shim.so"
