/* The BufferPool's own memory: one reserved range of address space, cut into blocks by a buddy
 * allocator (power-of-two blocks of 4 KiB and up; a freed block merges with its free buddy).
 * Memory a batch gives back stays mapped and goes to the next batch of any size on any thread:
 * the C library's per-thread arenas would hand it back to the kernel (trim) and take fresh,
 * zero-filled pages again, a page fault per 4 KiB of every new batch.
 * Free lists are side arrays indexed by 4 KiB block, so the blocks' own pages are never touched
 * here. kc_region_alloc returns NULL when no block fits: the caller then uses malloc.
 * Under AddressSanitizer (and on Windows) there is no region: every block comes from malloc, so
 * the sanitizer still sees each one. */
#ifndef KCORE_REGION_IMPL_H
#define KCORE_REGION_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "sync_impl.h"

#if defined(__SANITIZE_ADDRESS__)
#define KC_REGION_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KC_REGION_OFF 1
#endif
#endif
#if defined(_WIN32)
#define KC_REGION_OFF 1
#endif
#ifndef KC_REGION_OFF
#include <sys/mman.h>
#endif

#define KC_REGION_MIN_SHIFT 12   /* 4 KiB: the smallest block */
#define KC_REGION_MIN_SIZE (1u << 20)  /* least address space: smaller pools use malloc */
#define KC_REGION_MAX_SHIFT 36   /* 64 GiB of address space at most */

typedef struct {
    uint8_t *base;               /* NULL: no region */
    int top;                     /* log2 of the region's size */
    int32_t *next, *prev;        /* free-list links by block index */
    int8_t *order;               /* per block index: shift + 1 of a free block starting there */
    int32_t head[KC_REGION_MAX_SHIFT + 1];  /* first free block of each shift, -1: none */
    size_t in_use;               /* bytes of the blocks handed out */
    kc_mutex_t lock;
} kc_region;

KC_INLINE int kc_region_shift(size_t n)
{
    int s = KC_REGION_MIN_SHIFT;
    while (((size_t)1 << s) < n)
        s++;
    return s;
}

KC_INLINE void kc_region_push(kc_region *r, int32_t i, int s)
{
    r->order[i] = (int8_t)(s + 1);
    r->prev[i] = -1;
    r->next[i] = r->head[s];
    if (r->head[s] >= 0)
        r->prev[r->head[s]] = i;
    r->head[s] = i;
}

KC_INLINE void kc_region_unlink(kc_region *r, int32_t i, int s)
{
    r->order[i] = 0;
    if (r->prev[i] >= 0)
        r->next[r->prev[i]] = r->next[i];
    else
        r->head[s] = r->next[i];
    if (r->next[i] >= 0)
        r->prev[r->next[i]] = r->prev[i];
}

/* A region of at least `want` bytes of address space (none, base NULL, if want is under 1 MiB,
 * too large, or the reservation fails). Returns 0, or -1 if the lock cannot be made. */
KC_INLINE int kc_region_init(kc_region *r, size_t want)
{
    size_t blocks;
    int s;
    r->base = NULL;
    r->in_use = 0;
    for (s = 0; s <= KC_REGION_MAX_SHIFT; s++)
        r->head[s] = -1;
    if (kc_mutex_init(&r->lock) != 0)
        return -1;
#ifndef KC_REGION_OFF
    if (want < KC_REGION_MIN_SIZE || want > ((size_t)1 << KC_REGION_MAX_SHIFT))
        return 0;
    r->top = kc_region_shift(want);
    blocks = (size_t)1 << (r->top - KC_REGION_MIN_SHIFT);
    r->next = (int32_t *)malloc(blocks * sizeof(int32_t));
    r->prev = (int32_t *)malloc(blocks * sizeof(int32_t));
    r->order = (int8_t *)calloc(blocks, 1);
    if (r->next != NULL && r->prev != NULL && r->order != NULL) {
        void *p = mmap(NULL, (size_t)1 << r->top, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            r->base = (uint8_t *)p;
            kc_region_push(r, 0, r->top);
            return 0;
        }
    }
    free(r->next);
    free(r->prev);
    free(r->order);
#else
    (void)want;
    (void)blocks;
#endif
    return 0;
}

/* A block of at least n bytes, or NULL (no region, or no free block large enough). */
KC_INLINE uint8_t *kc_region_alloc(kc_region *r, size_t n)
{
    int s, j;
    int32_t i;
    if (r->base == NULL)
        return NULL;
    s = kc_region_shift(n);
    if (s > r->top)
        return NULL;
    kc_mutex_lock(&r->lock);
    for (j = s; j <= r->top && r->head[j] < 0; j++)
        ;
    if (j > r->top) {
        kc_mutex_unlock(&r->lock);
        return NULL;
    }
    i = r->head[j];
    kc_region_unlink(r, i, j);
    while (j > s) {  /* split: keep the lower half, free the upper one */
        j--;
        kc_region_push(r, i + ((int32_t)1 << (j - KC_REGION_MIN_SHIFT)), j);
    }
    r->in_use += (size_t)1 << s;
    kc_mutex_unlock(&r->lock);
    return r->base + ((size_t)i << KC_REGION_MIN_SHIFT);
}

/* Take back p (n: the size it was asked with); 0 if p is not the region's (free it then). */
KC_INLINE int kc_region_free(kc_region *r, uint8_t *p, size_t n)
{
    int s;
    int32_t i, buddy;
    if (r->base == NULL || p < r->base || p >= r->base + ((size_t)1 << r->top))
        return 0;
    s = kc_region_shift(n);
    i = (int32_t)((size_t)(p - r->base) >> KC_REGION_MIN_SHIFT);
    kc_mutex_lock(&r->lock);
    r->in_use -= (size_t)1 << s;
    while (s < r->top) {
        buddy = i ^ ((int32_t)1 << (s - KC_REGION_MIN_SHIFT));
        if (r->order[buddy] != s + 1)
            break;
        kc_region_unlink(r, buddy, s);
        if (buddy < i)
            i = buddy;
        s++;
    }
    kc_region_push(r, i, s);
    kc_mutex_unlock(&r->lock);
    return 1;
}

/* Give the address space back, unless blocks are still out: then all of it stays (a later
 * kc_region_free still works), unused. */
KC_INLINE void kc_region_destroy(kc_region *r)
{
    if (r->base != NULL) {
        if (r->in_use != 0)
            return;
#ifndef KC_REGION_OFF
        munmap(r->base, (size_t)1 << r->top);
#endif
        free(r->next);
        free(r->prev);
        free(r->order);
        r->base = NULL;
    }
    kc_mutex_destroy(&r->lock);
}

/* Bytes of address space reserved; 0 without a region. */
KC_INLINE size_t kc_region_size(kc_region *r)
{
    return r->base == NULL ? 0 : (size_t)1 << r->top;
}

/* Bytes of the blocks handed out (for tests); 0 without a region. */
KC_INLINE size_t kc_region_in_use(kc_region *r)
{
    size_t n;
    kc_mutex_lock(&r->lock);
    n = r->in_use;
    kc_mutex_unlock(&r->lock);
    return n;
}

#endif
