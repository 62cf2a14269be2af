# interop.siw_abort, included from tests/interop/CMakeLists.txt after the
# NDK_CM_PEER guard there: an abort (kill -9) from either side of an
# established libndk <-> Linux siw connection, seen by the other end. Gets
# ndk_peer, cm_peer (or "none": the test then skips with 77) and the project
# root, like the other siw drivers; shares their siw_guest lock.
ndk_interop_test(siw_abort)
