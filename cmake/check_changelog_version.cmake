# cmake -DVERSION=X.Y.Z -DCHANGELOG=debian/changelog -P check_changelog_version.cmake
# Fails unless the newest entry of the Debian changelog packages upstream
# version X.Y.Z ("libndk (X.Y.Z-N) ..."; an epoch "E:" is allowed).
file(STRINGS "${CHANGELOG}" first LIMIT_COUNT 1)
if(NOT first MATCHES "^[a-z0-9.+-]+ \\(([0-9]+:)?([^-)]+)(-[^)]*)?\\) ")
  message(FATAL_ERROR "${CHANGELOG}: first line is no changelog entry: '${first}'")
endif()
set(upstream "${CMAKE_MATCH_2}")
if(NOT upstream STREQUAL VERSION)
  message(FATAL_ERROR "debian/changelog packages ${upstream}, CMakeLists.txt's project(VERSION) is ${VERSION}: "
                      "add a changelog entry (dch -v ${VERSION}-1) or fix the version")
endif()
message(STATUS "ok: debian/changelog and project(VERSION) both say ${VERSION}")
