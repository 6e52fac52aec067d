# The fuzz targets as CTest tests (label `fuzz`), included by the top-level CMakeLists.txt of
# the normal (g++) build: fuzz.build configures and builds the clang build of tests/fuzz/ in
# build/fuzz (tests/fuzz/build.sh; skipped, with the reason, without clang++ and libFuzzer),
# then each fuzz.TARGET runs one harness for DEPLOYD_FUZZ_SECONDS (30 unless set, at test
# time) from its committed corpus, and fails on a finding (tests/fuzz/run.sh).
set(DEPLOYD_FUZZ_TARGETS plan_parser control_request builtin_request progress_line weights
    nvidia_smi version units inventory)
set(DEPLOYD_FUZZ_BUILD ${CMAKE_BINARY_DIR}/fuzz)
add_test(NAME fuzz.build
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/fuzz/build.sh ${CMAKE_SOURCE_DIR} ${DEPLOYD_FUZZ_BUILD}
                 ${CMAKE_COMMAND} "${CMAKE_CXX_COMPILER_LAUNCHER}")
set_tests_properties(fuzz.build PROPERTIES FIXTURES_SETUP fuzz_build SKIP_RETURN_CODE 77
                     TIMEOUT 1800 PROCESSORS 2 LABELS fuzz)
foreach(target ${DEPLOYD_FUZZ_TARGETS})
  add_test(NAME fuzz.${target}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh --one ${DEPLOYD_FUZZ_BUILD} ${target})
  # 700 s: room for DEPLOYD_FUZZ_SECONDS=600, the on-demand run, plus the last input's -timeout.
  set_tests_properties(fuzz.${target} PROPERTIES FIXTURES_REQUIRED fuzz_build
                       SKIP_RETURN_CODE 77 TIMEOUT 700 LABELS fuzz)
endforeach()
