# ndkperf --perftest (perftest 6.06's protocol over rdma_cm) against
# Debian's perftest on Linux siw in the harness's guest; included from
# tests/interop/CMakeLists.txt. Each driver gets the ndkperf binary and the
# project root.
#
#   interop.perftest_siw_client  guest ib_{write,send,read}_bw / ib_send_lat -R
#                                -> ndkperf --perftest servers (one guest boot)
#   interop.perftest_siw_server  ndkperf --perftest clients -> guest
#                                ib_{write,send,read}_bw / ib_{send,write}_lat -R
#                                servers (one guest boot)
#   interop.perftest_siw_all     ib_send_lat / ib_write_lat -R -a both ways (one
#                                guest boot; the 8 MiB sizes are slow under TCG)
#
# They skip (77) without the harness, root or a guest build, and share the
# siw_guest lock with the other guest tests: build-guest.sh must not run
# twice at once, and two TCG guests on a small machine slow each other
# towards siw's and perftest's timeouts.
set(NDK_PERFTEST_DIR ${CMAKE_CURRENT_LIST_DIR})

foreach(name perftest_siw_client perftest_siw_server)
  add_test(NAME interop.${name}
           COMMAND bash ${NDK_PERFTEST_DIR}/${name}.sh $<TARGET_FILE:ndkperf> ${PROJECT_SOURCE_DIR})
  set_tests_properties(interop.${name} PROPERTIES LABELS interop TIMEOUT 300
                                                  SKIP_RETURN_CODE 77 RESOURCE_LOCK siw_guest)
endforeach()
add_test(NAME interop.perftest_siw_all
         COMMAND bash ${NDK_PERFTEST_DIR}/perftest_siw_all.sh $<TARGET_FILE:ndkperf> ${PROJECT_SOURCE_DIR})
set_tests_properties(interop.perftest_siw_all PROPERTIES LABELS interop TIMEOUT 1200
                                                          SKIP_RETURN_CODE 77 RESOURCE_LOCK siw_guest)

# interop.perftest_loopback: ndkperf --perftest against itself on the host,
# no guest: labelled conformance so that it runs without QEMU.
add_test(NAME interop.perftest_loopback
         COMMAND bash ${NDK_PERFTEST_DIR}/perftest_loopback.sh $<TARGET_FILE:ndkperf> ${PROJECT_SOURCE_DIR})
set_tests_properties(interop.perftest_loopback PROPERTIES LABELS conformance TIMEOUT 240)
