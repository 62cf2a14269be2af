# ndkping --ucmatose (rdma-core's ucmatose protocol over NDK), included from
# tests/interop/CMakeLists.txt. Each driver gets the ndkping binary and the
# project root.
#
#   interop.ucmatose_siw_client  guest ucmatose -c 10 -> ndkping --ucmatose servers
#   interop.ucmatose_siw_server  ndkping --ucmatose -c 10 clients -> guest ucmatose servers
#   interop.ucmatose_loopback    ndkping --ucmatose against itself on the host, no
#                                guest: labelled conformance so it runs without QEMU
#
# The guest tests skip (77) without the harness, root or a guest build, and
# share the siw_guest lock with the other guest tests.
foreach(name ucmatose_siw_client ucmatose_siw_server)
  ndk_guest_test(${name} 300 $<TARGET_FILE:ndkping> ${PROJECT_SOURCE_DIR})
endforeach()
ndk_loopback_test(ucmatose_loopback ndkping 120)
