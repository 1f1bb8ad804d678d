/* CRC-32C, table-driven ("slicing by 8"); see crc32c.h.
 *
 * The reflected form (bits taken least significant first, as iSCSI sends them), polynomial
 * 0x1EDC6F41, reversed 0x82F63B78, initial value and final XOR 0xFFFFFFFF.
 * T[0][b] is the CRC register after shifting byte b through it alone; T[k][b] =
 * (T[k-1][b] >> 8) ^ T[0][T[k-1][b] & 0xFF] is the same byte followed by k zero bytes, so
 * 8 input bytes combine with 8 look-ups (Intel's "slicing-by-8"). The byte loop is the
 * textbook algorithm; tests/test_st.c checks both against the published check value and
 * a bit-at-a-time reference on every length and alignment.
 *
 * Where the CPU has SSE4.2 (every x86-64 since 2008), crc32c runs its CRC32 instruction
 * instead, which computes this very CRC (same polynomial, reflected): 8 bytes per
 * instruction, about ten times the table's speed, which matters for a model's checksums on
 * the way to the first word (an 11 MB model: ~7 ms by table, under 1 ms so). The test
 * checks it against the table and the bitwise reference the same way. */
#include "crc32c.h"

#include <stdio.h>
#include <string.h>

#include <threads.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define CRC32C_HW 1
#else
#define CRC32C_HW 0
#endif

#define CRC32C_POLY_REVERSED 0x82F63B78u

static uint32_t table[8][256];
static once_flag table_once = ONCE_FLAG_INIT;
static int have_hw; /* the CPU has SSE4.2's CRC32 (set with the table, once) */

static void make_table(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (CRC32C_POLY_REVERSED & (0u - (c & 1u)));
        table[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t b = 0; b < 256; b++)
            table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xFFu];
#if CRC32C_HW
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if CRC32C_HW
/* The register c (already inverted) after p[0..n), by the CRC32 instruction. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                        size_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* x86 is little-endian: the bytes in the CRC's order */
        c64 = _mm_crc32_u64(c64, v);
    }
    uint32_t c32 = (uint32_t)c64;
    for (; n > 0; n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

const char *crc32c_impl(void)
{
    call_once(&table_once, make_table);
    return have_hw ? "sse4.2" : "table";
}

uint32_t crc32c(uint32_t crc, const void *data, size_t n)
{
    call_once(&table_once, make_table);
#if CRC32C_HW
    if (have_hw)
        return ~crc_hw(~crc, data, n);
#endif
    return crc32c_table(crc, data, n);
}

uint32_t crc32c_table(uint32_t crc, const void *data, size_t n)
{
    call_once(&table_once, make_table);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        /* the 8 bytes as a little-endian pair of words, whatever the host's order */
        const uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                 (uint32_t)p[3] << 24);
        c = table[7][lo & 0xFFu] ^ table[6][(lo >> 8) & 0xFFu] ^ table[5][(lo >> 16) & 0xFFu] ^
            table[4][lo >> 24] ^ table[3][p[4]] ^ table[2][p[5]] ^ table[1][p[6]] ^
            table[0][p[7]];
    }
    for (; n > 0; n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFFu];
    return ~c;
}

int crc32c_file(const char *path, uint64_t *fingerprint)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    unsigned char buf[1 << 16];
    uint32_t c = 0;
    uint64_t size = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        c = crc32c(c, buf, got);
        size += got;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad)
        return -1;
    *fingerprint = size << 32 ^ c; /* the size, then the CRC (sizes past 4 GiB fold in) */
    return 0;
}
