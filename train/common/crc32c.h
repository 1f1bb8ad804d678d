/*
 * crc32c — CRC-32C (Castagnoli), the checksum of every tensor of a checkpoint (ckpt.h).
 *
 * Why this one: it is a standard with a published check value (crc32c("123456789") =
 * 0xE3069283; RFC 3720, iSCSI), used the same way by ext4, Btrfs and Google's file
 * formats, so anyone can recompute a checkpoint's checksums with an ordinary tool
 * (Python: `crc32c`, `google-crc32c`); it catches every error burst of up to 32 bits and
 * lets a random corruption through with probability 2^-32, which is what a file check
 * needs (it is no defence against someone who edits a file on purpose and recomputes it);
 * and it takes a page of code with no new dependency. Its polynomial has hardware support
 * (SSE4.2 `crc32`, ARMv8 CRC) should the table version below ever be too slow; it runs at
 * about 1–2 GB/s, small beside writing the file.
 */
#ifndef TRAIN_CRC32C_H
#define TRAIN_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of data[n] continuing from `crc` (0 to start): crc32c(crc32c(0, a), b) is
 * the CRC-32C of a followed by b. Thread-safe. */
uint32_t crc32c(uint32_t crc, const void *data, size_t n);
/* The same by table (slicing-by-8) on any CPU; crc32c uses the CPU's CRC32 instruction
 * where it has one (SSE4.2). Both give the same values; tests/test_st.c checks both. */
uint32_t crc32c_table(uint32_t crc, const void *data, size_t n);
/* Which crc32c runs here: "sse4.2" or "table". */
const char *crc32c_impl(void);
/* A fingerprint of the file at path: its size shifted up by 32 bits, xor its CRC-32C.
 * Returns 0, or -1 when it cannot be read (*fingerprint untouched). */
int crc32c_file(const char *path, uint64_t *fingerprint);

#endif /* TRAIN_CRC32C_H */
