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
foreach(name perftest_siw_client perftest_siw_server)
  ndk_guest_test(${name} 300 $<TARGET_FILE:ndkperf> ${PROJECT_SOURCE_DIR})
endforeach()
ndk_guest_test(perftest_siw_all 1200 $<TARGET_FILE:ndkperf> ${PROJECT_SOURCE_DIR})

# interop.perftest_loopback: ndkperf --perftest against itself on the host.
ndk_loopback_test(perftest_loopback ndkperf 240)
# About 25 s, mostly waiting: starts early under ctest -j (tests/CMakeLists.txt,
# Scheduling).
set_tests_properties(interop.perftest_loopback PROPERTIES COST 25)
