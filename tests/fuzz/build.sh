#!/bin/sh
# Usage: build.sh SOURCE_DIR BUILD_DIR [CMAKE [LAUNCHER]]
# Configures and builds the libFuzzer build of deployd (tests/fuzz/CMakeLists.txt) in
# BUILD_DIR: the layers and the harnesses, compiled by clang++ with
# -fsanitize=fuzzer,address,undefined. Exits 77 (CTest's skip) with the reason, kept in
# BUILD_DIR/unavailable for the fuzz tests, when clang++ or libFuzzer is missing, or when
# DEPLOYD_FUZZ_TESTS=off. DEPLOYD_FUZZ_CXX names another clang++; DEPLOYD_FUZZ_JOBS the
# compile jobs (2).
set -eu
src=$1 dir=$2 cmake=${3:-cmake} launcher=${4:-}
cxx=${DEPLOYD_FUZZ_CXX:-clang++}
mkdir -p "$dir"
rm -f "$dir/unavailable"
skip() {
  echo "fuzz tests skipped: $1"
  echo "$1" >"$dir/unavailable"
  exit 77
}
[ "${DEPLOYD_FUZZ_TESTS:-on}" != off ] || skip "DEPLOYD_FUZZ_TESTS=off"
command -v "$cxx" >/dev/null 2>&1 || skip "no $cxx (Debian package clang)"
probe=$dir/libfuzzer_probe
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe.cc"
"$cxx" -fsanitize=fuzzer,address,undefined "$probe.cc" -o "$probe" 2>"$probe.log" ||
  skip "$cxx cannot link -fsanitize=fuzzer,address,undefined (Debian package libclang-rt-14-dev): $(head -n 1 "$probe.log")"
generator=
if command -v ninja >/dev/null 2>&1; then generator="-G Ninja"; fi
# shellcheck disable=SC2086 # $generator is empty or two words
"$cmake" -S "$src" -B "$dir" $generator -DDEPLOYD_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} >"$dir/configure.log" ||
  { cat "$dir/configure.log"; exit 1; }
"$cmake" --build "$dir" -j "${DEPLOYD_FUZZ_JOBS:-2}"
