/* CRC32C (Castagnoli, reflected poly 0x82F63B78) for kcore.crc.
 *
 * kcore_crc32c(crc, p, n) continues a finished CRC (0 to start), like crc32c.crc32c(data, crc).
 * Call kcore_crc32c_init() once first: it builds the tables and picks the path at run time:
 * SSE4.2 crc32 on x86-64, the ARMv8 CRC32 instructions on aarch64, else slicing-by-8 tables.
 *
 * The hardware paths hide the crc instruction's latency by running three independent CRCs over
 * three adjacent lanes of a block, then joining them: the CRC register is linear, so
 * state(A|B) = zeros(state(A), len(B)) ^ state_from_0(B), where zeros(s, L) advances s over L zero
 * bytes, i.e. multiplies it by x^(8L) mod P. That product is precomputed per lane length as four
 * 256-entry tables (one per byte of s). */
#ifndef KCORE_CRC32C_IMPL_H
#define KCORE_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KCORE_CRC32C_POLY 0x82F63B78u
/* Lane lengths in bytes, longest first (a block is three lanes); multiples of 8. */
static const size_t kcore_crc32c_lanes[] = {8192, 1024, 256};
#define KCORE_NLANES (sizeof(kcore_crc32c_lanes) / sizeof(kcore_crc32c_lanes[0]))

static uint32_t kcore_crc32c_t8[8][256];       /* slicing-by-8 */
static uint32_t kcore_crc32c_z[KCORE_NLANES][4][256]; /* zeros operator per lane length */

/* Raw update of the (pre-inverted) register state. */
typedef uint32_t (*kcore_crc32c_fn)(uint32_t state, const uint8_t *p, size_t n);

static uint32_t kcore_crc32c_raw_table(uint32_t s, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        s = kcore_crc32c_t8[0][(s ^ *p++) & 0xff] ^ (s >> 8);
        n--;
    }
    while (n >= 8) {
        /* little-endian assembly of the words, whatever the host order */
        uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
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

/* a * b mod P, both reflected (bit 31 is x^0). */
static uint32_t kcore_crc32c_mulmod(uint32_t a, uint32_t b)
{
    uint32_t m, prod = 0;
    for (m = 0x80000000u; m; m >>= 1) {
        if (a & m)
            prod ^= b;
        b = (b >> 1) ^ (KCORE_CRC32C_POLY & (0u - (b & 1))); /* b *= x */
    }
    return prod;
}

/* Tables for s -> s * x^(8 * nbytes) mod P. */
static void kcore_crc32c_zeros_init(uint32_t z[4][256], size_t nbytes)
{
    uint32_t sq = 0x00800000u, xn = 0x80000000u; /* sq = x^8, xn = 1 */
    int i, k;
    for (; nbytes; nbytes >>= 1) {
        if (nbytes & 1)
            xn = kcore_crc32c_mulmod(xn, sq);
        sq = kcore_crc32c_mulmod(sq, sq);
    }
    for (k = 0; k < 4; k++)
        for (i = 0; i < 256; i++)
            z[k][i] = kcore_crc32c_mulmod(xn, (uint32_t)i << (8 * k));
}

static uint32_t kcore_crc32c_shift(uint32_t z[4][256], uint32_t s)
{
    return z[0][s & 0xff] ^ z[1][(s >> 8) & 0xff] ^ z[2][(s >> 16) & 0xff] ^ z[3][s >> 24];
}

/* One hardware path: C8(state, byte) and C64(state, 8 little-endian bytes) are the instructions. */
#define KCORE_CRC32C_HW(NAME, ATTR, C8, C64)                                                   \
    static ATTR uint32_t NAME##_block(uint32_t s, const uint8_t *p, size_t lane,               \
                                      uint32_t z[4][256])                                      \
    {                                                                                          \
        uint64_t s0 = s, s1 = 0, s2 = 0, w0, w1, w2;                                           \
        const uint8_t *end = p + lane;                                                         \
        do {                                                                                   \
            memcpy(&w0, p, 8);                                                                 \
            memcpy(&w1, p + lane, 8);                                                          \
            memcpy(&w2, p + 2 * lane, 8);                                                      \
            s0 = C64(s0, w0);                                                                  \
            s1 = C64(s1, w1);                                                                  \
            s2 = C64(s2, w2);                                                                  \
            p += 8;                                                                            \
        } while (p < end);                                                                     \
        s = kcore_crc32c_shift(z, (uint32_t)s0) ^ (uint32_t)s1;                                \
        return kcore_crc32c_shift(z, s) ^ (uint32_t)s2;                                        \
    }                                                                                          \
    static ATTR uint32_t NAME(uint32_t s, const uint8_t *p, size_t n)                          \
    {                                                                                          \
        uint64_t w, s64;                                                                       \
        size_t i, lane;                                                                        \
        while (n && ((uintptr_t)p & 7)) {                                                      \
            s = C8(s, *p++);                                                                   \
            n--;                                                                               \
        }                                                                                      \
        for (i = 0; i < KCORE_NLANES; i++)                                                     \
            for (lane = kcore_crc32c_lanes[i]; n >= 3 * lane; n -= 3 * lane, p += 3 * lane)    \
                s = NAME##_block(s, p, lane, kcore_crc32c_z[i]);                               \
        for (s64 = s; n >= 8; n -= 8, p += 8) {                                                \
            memcpy(&w, p, 8);                                                                  \
            s64 = C64(s64, w);                                                                 \
        }                                                                                      \
        for (s = (uint32_t)s64; n; n--)                                                        \
            s = C8(s, *p++);                                                                   \
        return s;                                                                              \
    }

#if defined(__x86_64__) || defined(_M_X64)
#define KCORE_HW_NAME "sse4.2"
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#include <nmmintrin.h>
#define KCORE_HW_ATTR
static int kcore_crc32c_hw_ok(void)
{
    int r[4];
    __cpuid(r, 1);
    return (r[2] >> 20) & 1;
}
#else
#include <cpuid.h>
#include <nmmintrin.h>
#if defined(__clang__) && __has_include(<crc32intrin.h>)
/* clang 14+ has a crc32 feature of its own, which some versions (zig's, for the macOS and
 * Windows cross builds) do not take from sse4.2 */
#define KCORE_HW_ATTR __attribute__((target("sse4.2,crc32")))
#else
#define KCORE_HW_ATTR __attribute__((target("sse4.2")))
#endif
static int kcore_crc32c_hw_ok(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && ((c >> 20) & 1);
}
#endif
#define KCORE_HW_C8(s, b) _mm_crc32_u8((uint32_t)(s), (b))
#define KCORE_HW_C64(s, w) _mm_crc32_u64((s), (w))
KCORE_CRC32C_HW(kcore_crc32c_raw_hw, KCORE_HW_ATTR, KCORE_HW_C8, KCORE_HW_C64)

#elif (defined(__aarch64__) && defined(__AARCH64EL__)) || defined(_M_ARM64)
#define KCORE_HW_NAME "armv8"
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#define KCORE_HW_ATTR
#define KCORE_HW_C8(s, b) __crc32cb((uint32_t)(s), (b))
#define KCORE_HW_C64(s, w) __crc32cd((uint32_t)(s), (w))
static int kcore_crc32c_hw_ok(void)
{
    return IsProcessorFeaturePresent(PF_ARM_V8_CRC32_INSTRUCTIONS_AVAILABLE) != 0;
}
#else
/* compiler builtins rather than arm_acle.h, whose declarations some versions hide without +crc */
#if defined(__clang__)
#define KCORE_HW_ATTR __attribute__((target("crc")))
#define KCORE_HW_C8(s, b) __builtin_arm_crc32cb((uint32_t)(s), (b))
#define KCORE_HW_C64(s, w) __builtin_arm_crc32cd((uint32_t)(s), (w))
#else
#define KCORE_HW_ATTR __attribute__((target("+crc")))
#define KCORE_HW_C8(s, b) __builtin_aarch64_crc32cb((uint32_t)(s), (b))
#define KCORE_HW_C64(s, w) __builtin_aarch64_crc32cx((uint32_t)(s), (w))
#endif
#if defined(__APPLE__)
static int kcore_crc32c_hw_ok(void) { return 1; } /* every arm64 Apple CPU has CRC32 */
#elif defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
static int kcore_crc32c_hw_ok(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#elif defined(__ARM_FEATURE_CRC32)
static int kcore_crc32c_hw_ok(void) { return 1; }
#else
static int kcore_crc32c_hw_ok(void) { return 0; }
#endif
#endif
KCORE_CRC32C_HW(kcore_crc32c_raw_hw, KCORE_HW_ATTR, KCORE_HW_C8, KCORE_HW_C64)
#endif

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
#ifdef KCORE_HW_NAME
    for (i = 0; i < (int)KCORE_NLANES; i++)
        kcore_crc32c_zeros_init(kcore_crc32c_z[i], kcore_crc32c_lanes[i]);
    if (kcore_crc32c_hw_ok()) {
        kcore_crc32c_raw = kcore_crc32c_raw_hw;
        kcore_crc32c_name = KCORE_HW_NAME;
    }
#endif
}

#endif
