/* Atomic loads and stores for kcore's fields that threads share without a lock (the "hints" of
 * the .pxd rules, counters read by metrics(), and flags that publish other fields). A plain
 * access to such a field from two threads is a data race (undefined, and a ThreadSanitizer
 * report) even where its logic tolerates a stale value; these make it defined. GCC and Clang:
 * the __atomic builtins; MSVC: volatile accesses (acquire/release on x86 and x64 with its
 * default /volatile:ms) and Interlocked operations. kc_xchg_int and kc_cas_int
 * (1 if *p was expected and is now v) are sequentially consistent. Python.h comes first (Cython includes it). */
#ifndef KCORE_ATOMIC_IMPL_H
#define KCORE_ATOMIC_IMPL_H

#include <stdint.h>
#include <stddef.h>

#if defined(_MSC_VER)
#include <intrin.h>
#define KC_A_INLINE static __inline
KC_A_INLINE int kc_load_int(const int *p) { return *(volatile const int *)p; }
KC_A_INLINE void kc_store_int(int *p, int v) { *(volatile int *)p = v; }
KC_A_INLINE int kc_load_int_acquire(const int *p) { return *(volatile const int *)p; }
KC_A_INLINE void kc_store_int_release(int *p, int v) { *(volatile int *)p = v; }
KC_A_INLINE int64_t kc_load_i64(const int64_t *p) { return *(volatile const int64_t *)p; }
KC_A_INLINE void kc_store_i64(int64_t *p, int64_t v) { *(volatile int64_t *)p = v; }
KC_A_INLINE int64_t kc_add_i64(int64_t *p, int64_t v)
{
    return _InterlockedExchangeAdd64((volatile __int64 *)p, v) + v;
}
KC_A_INLINE int kc_xchg_int(int *p, int v) { return (int)_InterlockedExchange((volatile long *)p, v); }
KC_A_INLINE int kc_cas_int(int *p, int expected, int v)
{
    return _InterlockedCompareExchange((volatile long *)p, v, expected) == expected;
}
KC_A_INLINE Py_ssize_t kc_load_ssize(const Py_ssize_t *p) { return *(volatile const Py_ssize_t *)p; }
KC_A_INLINE void kc_store_ssize(Py_ssize_t *p, Py_ssize_t v) { *(volatile Py_ssize_t *)p = v; }
KC_A_INLINE void *kc_load_ptr_acquire(void *const *p) { return *(void *volatile const *)p; }
KC_A_INLINE void kc_store_ptr_release(void **p, void *v) { *(void *volatile *)p = v; }
#else
#define KC_A_INLINE static inline
KC_A_INLINE int kc_load_int(const int *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
KC_A_INLINE void kc_store_int(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
KC_A_INLINE int kc_load_int_acquire(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
KC_A_INLINE void kc_store_int_release(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
KC_A_INLINE int64_t kc_load_i64(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
KC_A_INLINE void kc_store_i64(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
KC_A_INLINE int64_t kc_add_i64(int64_t *p, int64_t v)
{
    return __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
}
KC_A_INLINE int kc_xchg_int(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
KC_A_INLINE int kc_cas_int(int *p, int expected, int v)
{
    return __atomic_compare_exchange_n(p, &expected, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
KC_A_INLINE Py_ssize_t kc_load_ssize(const Py_ssize_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
KC_A_INLINE void kc_store_ssize(Py_ssize_t *p, Py_ssize_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
KC_A_INLINE void *kc_load_ptr_acquire(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
KC_A_INLINE void kc_store_ptr_release(void **p, void *v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
#endif

#endif /* KCORE_ATOMIC_IMPL_H */
