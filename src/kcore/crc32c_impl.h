/* CRC32C (Castagnoli, reflected poly 0x82F63B78) for kcore.crc.
 * kcore_crc32c(crc, p, n) continues a finished CRC (0 to start), like crc32c.crc32c(data, crc).
 * Call kcore_crc32c_init() once before use; it builds the tables and picks the fastest path. */
#ifndef KCORE_CRC32C_IMPL_H
#define KCORE_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KCORE_CRC32C_POLY 0x82F63B78u

static uint32_t kcore_crc32c_t8[8][256]; /* slicing-by-8 tables */

/* Raw (no pre/post inversion) update of the register state. */
typedef uint32_t (*kcore_crc32c_fn)(uint32_t state, const uint8_t *p, size_t n);

static uint32_t kcore_crc32c_raw_table(uint32_t s, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        s = kcore_crc32c_t8[0][(s ^ *p++) & 0xff] ^ (s >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= s;
        s = kcore_crc32c_t8[7][lo & 0xff] ^ kcore_crc32c_t8[6][(lo >> 8) & 0xff] ^
            kcore_crc32c_t8[5][(lo >> 16) & 0xff] ^ kcore_crc32c_t8[4][lo >> 24] ^
            kcore_crc32c_t8[3][hi & 0xff] ^ kcore_crc32c_t8[2][(hi >> 8) & 0xff] ^
            kcore_crc32c_t8[1][(hi >> 16) & 0xff] ^ kcore_crc32c_t8[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        s = kcore_crc32c_t8[0][(s ^ *p++) & 0xff] ^ (s >> 8);
    return s;
}

static kcore_crc32c_fn kcore_crc32c_raw = kcore_crc32c_raw_table;
static const char *kcore_crc32c_name = "table";

static uint32_t kcore_crc32c_table(uint32_t crc, const uint8_t *p, size_t n)
{
    return ~kcore_crc32c_raw_table(~crc, p, n);
}

static uint32_t kcore_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    return ~kcore_crc32c_raw(~crc, p, n);
}

static void kcore_crc32c_init(void)
{
    int i, k;
    for (i = 0; i < 256; i++) {
        uint32_t c = (uint32_t)i;
        for (k = 0; k < 8; k++)
            c = (c >> 1) ^ (KCORE_CRC32C_POLY & (0u - (c & 1)));
        kcore_crc32c_t8[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (k = 1; k < 8; k++)
            kcore_crc32c_t8[k][i] = kcore_crc32c_t8[0][kcore_crc32c_t8[k - 1][i] & 0xff] ^
                                    (kcore_crc32c_t8[k - 1][i] >> 8);
}

#endif
