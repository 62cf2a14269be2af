/* What every fuzz target starts with: libFuzzer's entry point and ENSURE,
 * the check whose failure is a finding (abort() is what libFuzzer catches;
 * the file and line say which check). */
#ifndef NDK_FUZZ_ENSURE_H
#define NDK_FUZZ_ENSURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ENSURE(c)                                                                            \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                          \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

#endif
