# ndkping --rping (rdma-core's rping protocol over NDK), included from
# tests/interop/CMakeLists.txt. Each driver gets the ndkping binary and the
# project root.
#
#   interop.rping_siw_client  guest rping -c -> ndkping --rping -s (one guest boot)
#   interop.rping_siw_server  ndkping --rping -c -> guest rping -s (one guest boot)
#   interop.rping_loopback    ndkping --rping -s / -c on the host, no guest:
#                             labelled conformance so it runs without QEMU
#
# The guest tests skip (77) without the harness, root or a guest build, and
# share the siw_guest lock with the other guest tests: build-guest.sh must
# not run twice at once, and two TCG guests on a small machine slow each
# other towards siw's and rping's timeouts.
foreach(name rping_siw_client rping_siw_server)
  ndk_guest_test(${name} 240 $<TARGET_FILE:ndkping> ${PROJECT_SOURCE_DIR})
endforeach()
ndk_loopback_test(rping_loopback ndkping 120)
