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
set(NDK_UCMATOSE_DIR ${CMAKE_CURRENT_LIST_DIR})

foreach(name ucmatose_siw_client ucmatose_siw_server)
  add_test(NAME interop.${name}
           COMMAND bash ${NDK_UCMATOSE_DIR}/${name}.sh $<TARGET_FILE:ndkping> ${PROJECT_SOURCE_DIR})
  set_tests_properties(interop.${name} PROPERTIES LABELS interop TIMEOUT 300
                                                  SKIP_RETURN_CODE 77 RESOURCE_LOCK siw_guest)
endforeach()

add_test(NAME interop.ucmatose_loopback
         COMMAND bash ${NDK_UCMATOSE_DIR}/ucmatose_loopback.sh $<TARGET_FILE:ndkping> ${PROJECT_SOURCE_DIR})
set_tests_properties(interop.ucmatose_loopback PROPERTIES LABELS conformance TIMEOUT 120)
