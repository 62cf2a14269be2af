# What `cmake --install` puts beside the libraries for consumers: the
# pkg-config files, the CMake package (find_package(ndk CONFIG), see
# cmake/ndkConfig.cmake.in) and the project's documents. Included from the
# top-level CMakeLists.txt after every target exists.
include(CMakePackageConfigHelpers)

set(NDK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ndk)

install(DIRECTORY include/ndk DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The .pc files find the prefix relative to themselves; Debian's libdir is
# lib/<multiarch>, so the way up is computed, not assumed.
file(RELATIVE_PATH NDK_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" NDK_PC_TO_PREFIX "${NDK_PC_TO_PREFIX}")
foreach(pc libndk libndk-wdk)
  configure_file(cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# One export set per development package, so that libndk's targets need
# nothing of the kit's and the kit's file is simply absent without it.
install(EXPORT ndkTargets NAMESPACE ndk:: DESTINATION ${NDK_CMAKE_DIR})
install(EXPORT ndkWdkTargets NAMESPACE ndk:: DESTINATION ${NDK_CMAKE_DIR})
configure_package_config_file(cmake/ndkConfig.cmake.in ${PROJECT_BINARY_DIR}/ndkConfig.cmake
                              INSTALL_DESTINATION ${NDK_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# The shared library's SONAME carries the major version (libndk.so.0) and
# its symbols the version node LIBNDK_0: any release with the same major
# version serves a consumer that asked for an older one.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ndkConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ndkConfig.cmake ${PROJECT_BINARY_DIR}/ndkConfigVersion.cmake
        DESTINATION ${NDK_CMAKE_DIR})

# The documents the man pages point to: every one of docs/.
file(GLOB NDK_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES README.md ${NDK_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR})

if(BUILD_TESTING)
  # debian/changelog names the same upstream version as project(VERSION).
  add_test(NAME docs.version_matches_debian_changelog
           COMMAND ${CMAKE_COMMAND} -DVERSION=${PROJECT_VERSION}
                   -DCHANGELOG=${PROJECT_SOURCE_DIR}/debian/changelog
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_changelog_version.cmake)
  set_tests_properties(docs.version_matches_debian_changelog PROPERTIES LABELS docs TIMEOUT 30)
endif()
