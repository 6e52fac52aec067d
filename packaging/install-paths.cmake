# Run at install time, by `cmake --install` and by CPack (an install(CODE) of CMakeLists.txt),
# when CMAKE_INSTALL_PREFIX is the prefix of *this* install: CPack installs the .deb's files
# under /usr whatever prefix the build was configured with. Writes the installed files whose
# content names installed paths into STAGE (DEPLOYD_BINARY_DIR/install-stage), for the
# install() rules that follow this one to copy:
#   STAGE/deployd.service          systemd/deployd.service with ExecStart= and Documentation=
#                                  from this prefix
#   STAGE/man/manN/NAME.N.gz       the man pages (when built), their paths from this prefix
# In: DEPLOYD_SOURCE_DIR, DEPLOYD_BINARY_DIR, DEPLOYD_SBINDIR, DEPLOYD_DOCDIR, DEPLOYD_DATADIR,
# DEPLOYD_SYSUSERS_DIR (each relative to the prefix or absolute), DEPLOYD_MAN_TEMPLATES.
function(deployd_full out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
deployd_full(sbindir "${DEPLOYD_SBINDIR}")
deployd_full(docdir "${DEPLOYD_DOCDIR}")
deployd_full(datadir "${DEPLOYD_DATADIR}")
deployd_full(sysusersdir "${DEPLOYD_SYSUSERS_DIR}")
set(stage "${DEPLOYD_BINARY_DIR}/install-stage")
file(REMOVE_RECURSE "${stage}")

# The repository's unit names /usr/local/bin/deployd (tests/systemd runs it so); the installed
# one names the binary this install puts in place, and the man pages.
file(READ "${DEPLOYD_SOURCE_DIR}/systemd/deployd.service" unit)
set(pages "man:deployd(8) man:deployd.yaml(5) man:deployd-plan(5) man:deployctl(1)")
set(readme "file:///usr/share/doc/deployd/README.md")
foreach(pair
    "ExecStart=/usr/local/bin/deployd|ExecStart=${sbindir}/deployd"
    "Documentation=${readme}|Documentation=${pages}\nDocumentation=file://${docdir}/README.md")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  string(FIND "${unit}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "systemd/deployd.service has no line '${from}' to rewrite for the "
                        "install (CMakeLists.txt, install section)")
  endif()
  string(REPLACE "${from}" "${to}" unit "${unit}")
endforeach()
file(WRITE "${stage}/deployd.service" "${unit}")

find_program(DEPLOYD_GZIP gzip)
foreach(template ${DEPLOYD_MAN_TEMPLATES})
  if(NOT EXISTS "${template}")
    continue()
  endif()
  get_filename_component(page "${template}" NAME_WLE)  # NAME.N
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section "${page}")
  file(READ "${template}" text)
  string(REPLACE "@SCHEMAFILE@" "${datadir}/deployd/plan-v1.schema.json" text "${text}")
  string(REPLACE "@DOCDIR@" "${docdir}" text "${text}")
  string(REPLACE "@SYSUSERSDIR@" "${sysusersdir}" text "${text}")
  file(WRITE "${stage}/man/man${section}/${page}" "${text}")
  if(DEPLOYD_GZIP)
    # Debian's way: gzip -9n (no name or time in the header: reproducible).
    execute_process(COMMAND "${DEPLOYD_GZIP}" -9n "${stage}/man/man${section}/${page}"
                    RESULT_VARIABLE result)
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "gzip ${stage}/man/man${section}/${page} failed")
    endif()
  endif()
endforeach()
