# Renders one man page from its scdoc source: `cmake -P man-page.cmake` with
#   SCDOC     the scdoc program
#   SOURCE    man/NAME.N.scd
#   TEMPLATE  the rendered page with its install paths left as @SCHEMAFILE@, @DOCDIR@ and
#             @SYSUSERSDIR@, which the install fills in from the prefix it installs under
#             (packaging/install-paths.cmake)
#   PREVIEW   the same page with the paths of the configured prefix (`man -l PREVIEW`)
#   VERSION   the version in the page's footer
#   SCHEMAFILE, DOCDIR, SYSUSERSDIR   the paths for PREVIEW
# scdoc passes the @NAME@ words through as text, so they survive the rendering.
file(READ "${SOURCE}" text)
string(REPLACE "@PROJECT_VERSION@" "${VERSION}" text "${text}")
file(WRITE "${TEMPLATE}.scd" "${text}")
execute_process(COMMAND "${SCDOC}" INPUT_FILE "${TEMPLATE}.scd" OUTPUT_FILE "${TEMPLATE}"
                ERROR_VARIABLE error RESULT_VARIABLE result)
file(REMOVE "${TEMPLATE}.scd")
if(NOT result EQUAL 0)
  file(REMOVE "${TEMPLATE}")
  message(FATAL_ERROR "scdoc ${SOURCE}: ${error}")
endif()
file(READ "${TEMPLATE}" page)
foreach(name SCHEMAFILE DOCDIR SYSUSERSDIR)
  string(REPLACE "@${name}@" "${${name}}" page "${page}")
endforeach()
file(WRITE "${PREVIEW}" "${page}")
