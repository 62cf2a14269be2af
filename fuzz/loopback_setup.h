/* What the fuzz targets that drive the provider over TCP (fuzz_cm_events.c,
 * fuzz_mpa_reply.c) share: their libFuzzer set-up, adapters on "lo" and a
 * listening socket for the peer they play, all on the fake kernel
 * (fake_net/fake_kernel.h). */
#ifndef NDK_FUZZ_LOOPBACK_SETUP_H
#define NDK_FUZZ_LOOPBACK_SETUP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndk/ndk.h>

/* This file also defines LLVMFuzzerInitialize for the targets it is linked
 * into: it adds -detect_leaks=0 to libFuzzer's arguments. Closed objects
 * are freed by the progress thread some loop iterations after their close
 * completed, so an input usually ends with more allocations than frees and
 * a leak scan after nearly every input would take most of the run time.
 * Leaks are still reported, by LSan at exit. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Opens the adapter of "lo" with the options o, a PD and a CQ of cq_depth
 * entries on it (never armed). False when the adapter does not open; a PD
 * or CQ that cannot be created aborts. */
bool fuzz_open_lo_adapter(const NDK_OPEN_OPTIONS *o, ULONG cq_depth, NDK_ADAPTER **ad, NDK_PD **pd,
                          NDK_CQ **cq);

/* Starts the fake kernel's random source (ports, STags) over from the
 * input's octets: one input, one path; different inputs, different ports. */
void fuzz_seed_from_input(const uint8_t *data, size_t size);

/* A fake TCP socket listening on 127.0.0.1 at a port the fake picks; its
 * address in *addr. Aborts when it cannot be made. */
int fuzz_lo_listen(struct sockaddr_in *addr);

#endif
