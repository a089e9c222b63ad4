/* The type table: every id ggml defines, with the block geometry the GGUF
 * format fixes, holes for removed ids, and row-size arithmetic. */
#include "ggml_types.h"
#include "npl_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Written out from the format definition (bytes = the block's fields):
 * e.g. q4_K = d, dmin (2+2) + 12 scale bytes + 128 nibble bytes = 144. */
static const struct {
    uint32_t id;
    const char *name;
    uint32_t block_size, type_size;
    bool can_dequantize;
} expected[] = {
    { 0, "f32", 1, 4, true },
    { 1, "f16", 1, 2, true },
    { 2, "q4_0", 32, 2 + 16, true },
    { 3, "q4_1", 32, 2 + 2 + 16, true },
    { 6, "q5_0", 32, 2 + 4 + 16, true },
    { 7, "q5_1", 32, 2 + 2 + 4 + 16, true },
    { 8, "q8_0", 32, 2 + 32, true },
    { 9, "q8_1", 32, 2 + 2 + 32, false },
    { 10, "q2_K", 256, 16 + 64 + 2 + 2, true },
    { 11, "q3_K", 256, 32 + 64 + 12 + 2, true },
    { 12, "q4_K", 256, 2 + 2 + 12 + 128, true },
    { 13, "q5_K", 256, 2 + 2 + 12 + 32 + 128, true },
    { 14, "q6_K", 256, 128 + 64 + 16 + 2, true },
    { 15, "q8_K", 256, 4 + 256 + 32, true },
    { 16, "iq2_xxs", 256, 2 + 64, false },
    { 17, "iq2_xs", 256, 2 + 64 + 8, false },
    { 18, "iq3_xxs", 256, 2 + 96, false },
    { 19, "iq1_s", 256, 2 + 32 + 16, false },
    { 20, "iq4_nl", 32, 2 + 16, true },
    { 21, "iq3_s", 256, 2 + 64 + 8 + 32 + 4, false },
    { 22, "iq2_s", 256, 2 + 64 + 16, false },
    { 23, "iq4_xs", 256, 2 + 2 + 4 + 128, true },
    { 24, "i8", 1, 1, false },
    { 25, "i16", 1, 2, false },
    { 26, "i32", 1, 4, false },
    { 27, "i64", 1, 8, false },
    { 28, "f64", 1, 8, false },
    { 29, "iq1_m", 256, 32 + 16 + 8, false },
    { 30, "bf16", 1, 2, true },
    { 34, "tq1_0", 256, 48 + 4 + 2, false },
    { 35, "tq2_0", 256, 64 + 2, false },
    { 39, "mxfp4", 32, 1 + 16, true },
};

static void every_defined_type_has_its_traits(void)
{
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        const npl_type_traits *t = npl_type_traits_get(expected[i].id);
        CHECK(t != NULL);
        if (t == NULL) {
            nt_note("  id %u", expected[i].id);
            continue;
        }
        CHECK(strcmp(t->name, expected[i].name) == 0);
        CHECK(t->block_size == expected[i].block_size);
        CHECK(t->type_size == expected[i].type_size);
        CHECK(t->can_dequantize == expected[i].can_dequantize);
        if (nt_failures())
            nt_note("  id %u (%s)", expected[i].id, expected[i].name);
    }
}

static void enum_values_are_the_file_ids(void)
{
    CHECK(NPL_TYPE_Q4_K == 12);
    CHECK(NPL_TYPE_BF16 == 30);
    CHECK(NPL_TYPE_TQ1_0 == 34);
    CHECK(NPL_TYPE_MXFP4 == 39);
    CHECK(NPL_TYPE_COUNT_MAX == 40);
}

static void removed_and_unknown_ids_have_none(void)
{
    static const uint32_t holes[] = { 4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 255, 65536, UINT32_MAX };
    for (size_t i = 0; i < sizeof holes / sizeof holes[0]; i++) {
        CHECK(npl_type_traits_get(holes[i]) == NULL);
        CHECK(npl_type_row_size(holes[i], 256) == 0);
        if (nt_failures())
            nt_note("  id %u", holes[i]);
    }
    /* And nothing else in range is a hole. */
    int defined = 0;
    for (uint32_t id = 0; id < NPL_TYPE_COUNT_MAX; id++)
        defined += npl_type_traits_get(id) != NULL;
    CHECK(defined == (int)(sizeof expected / sizeof expected[0]));
}

static void row_size_arithmetic(void)
{
    CHECK(npl_type_row_size(NPL_TYPE_F32, 3) == 12);
    CHECK(npl_type_row_size(NPL_TYPE_F16, 4096) == 8192);
    CHECK(npl_type_row_size(NPL_TYPE_Q4_0, 64) == 36);
    CHECK(npl_type_row_size(NPL_TYPE_Q4_0, 4096) == 128 * 18);
    CHECK(npl_type_row_size(NPL_TYPE_Q4_K, 4096) == 16 * 144);
    CHECK(npl_type_row_size(NPL_TYPE_Q6_K, 2560) == 10 * 210);
    CHECK(npl_type_row_size(NPL_TYPE_MXFP4, 2880) == 90 * 17);
    /* Not a whole number of blocks. */
    CHECK(npl_type_row_size(NPL_TYPE_Q4_0, 33) == 0);
    CHECK(npl_type_row_size(NPL_TYPE_Q4_K, 128) == 0);
    CHECK(npl_type_row_size(NPL_TYPE_Q8_0, 1) == 0);
    /* Negative and empty. */
    CHECK(npl_type_row_size(NPL_TYPE_F32, -1) == 0);
    CHECK(npl_type_row_size(NPL_TYPE_Q4_0, -32) == 0);
    CHECK(npl_type_row_size(NPL_TYPE_Q4_0, 0) == 0);
    /* Overflow of size_t: 2^62 floats need 2^64 bytes. */
    CHECK(npl_type_row_size(NPL_TYPE_F32, (int64_t)1 << 62) == 0);
    CHECK(npl_type_row_size(NPL_TYPE_F64, INT64_MAX) == 0);
    CHECK(npl_type_row_size(NPL_TYPE_F32, ((int64_t)1 << 62) - 1) == SIZE_MAX - 3);
}

/* can_dequantize and the dequantizer agree for every id. */
static void can_dequantize_matches_dequantizer(void)
{
    unsigned char zeros[512] = { 0 };
    float out[256];
    for (uint32_t id = 0; id < 64; id++) {
        const npl_type_traits *t = npl_type_traits_get(id);
        const int64_t n = t ? t->block_size : 32;
        const bool ok = npl_dequantize_row_ref(id, zeros, out, n);
        CHECK(ok == (t != NULL && t->can_dequantize));
        if (nt_failures()) {
            nt_note("  id %u", id);
            return;
        }
    }
}

static const nt_case cases[] = {
    { "every_defined_type_has_its_traits", every_defined_type_has_its_traits },
    { "enum_values_are_the_file_ids", enum_values_are_the_file_ids },
    { "removed_and_unknown_ids_have_none", removed_and_unknown_ids_have_none },
    { "row_size_arithmetic", row_size_arithmetic },
    { "can_dequantize_matches_dequantizer", can_dequantize_matches_dequantizer },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
