/* The libFuzzer entry point, shared by the fuzzer build and the plain
 * corpus driver that replays seed files as a regular test. */
#ifndef NPL_FUZZ_TARGET_H
#define NPL_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
