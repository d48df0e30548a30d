/* The fuzz targets' shared entry point. Every tests/fuzz/fuzz_<name>.c
 * defines LLVMFuzzerTestOneInput. Built with -DOP_FUZZ=ON (clang), each is a
 * libFuzzer binary; otherwise replay_main.c makes it a program that runs
 * every file of its checked-in corpus (tests/fuzz/corpus/<name>/), which
 * ctest does under ASan and UBSan on every run. Targets check properties
 * with FUZZ_ASSERT, which aborts so both drivers report the input. */
#ifndef OP_FUZZ_H
#define OP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(c)                                                                                       \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #c);                       \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

#endif
