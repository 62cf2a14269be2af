# interop.siw_abort, included from tests/interop/CMakeLists.txt after the
# NDK_CM_PEER guard there: an abort (kill -9) from either side of an
# established libndk <-> Linux siw connection, seen by the other end. Gets
# ndk_peer, cm_peer (or "none": the test then skips with 77) and the project
# root, like the other siw drivers; shares their siw_guest lock.
add_test(NAME interop.siw_abort
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/siw_abort.sh $<TARGET_FILE:ndk_peer> ${NDK_CM_PEER}
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(interop.siw_abort PROPERTIES LABELS interop TIMEOUT 240
                                                  SKIP_RETURN_CODE 77 RESOURCE_LOCK siw_guest)
