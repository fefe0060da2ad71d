# Atomic accesses of atomic_impl.h, for fields that threads share without a lock (.pxd rules
# call them "atomic"). Relaxed unless named: a relaxed access orders nothing else, so it suits
# hints and counters only; kc_store_int_release / kc_load_int_acquire publish the fields written
# before the store to the thread that sees it. Every access to such a field, on every thread,
# goes through these (a plain access beside an atomic one is still a race).
# Threads: any, with or without the GIL (pure C).
from libc.stdint cimport int64_t


cdef extern from "atomic_impl.h" nogil:
    int kc_load_int(const int* p)
    void kc_store_int(int* p, int v)
    int kc_load_int_acquire(const int* p)
    void kc_store_int_release(int* p, int v)
    int kc_xchg_int(int* p, int v)               # the old value
    bint kc_cas_int(int* p, int expected, int v)  # 1 if *p was expected (now v)
    # The same for bint fields (a C int; Cython types their address bool*)
    int kc_load_flag "kc_load_int"(const bint* p)
    int kc_load_flag_acquire "kc_load_int_acquire"(const bint* p)
    void kc_store_flag "kc_store_int"(bint* p, int v)
    int kc_xchg_flag "kc_xchg_int"(bint* p, int v)
    bint kc_cas_flag "kc_cas_int"(bint* p, int expected, int v)
    int64_t kc_load_i64(const int64_t* p)
    void kc_store_i64(int64_t* p, int64_t v)
    int64_t kc_add_i64(int64_t* p, int64_t v)
    Py_ssize_t kc_load_ssize(const Py_ssize_t* p)
    void kc_store_ssize(Py_ssize_t* p, Py_ssize_t v)
    # A pointer that publishes what it points to (release store, acquire load)
    void* kc_load_ptr_acquire(void** p)
    void kc_store_ptr_release(void** p, void* v)
