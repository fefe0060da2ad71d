# The buddy allocator of region_impl.h: the BufferPool's own memory (see the header).
# Threads: kc_region_alloc, kc_region_free, kc_region_in_use: any thread, without the GIL; they
# take r's own lock (the innermost: BufferPool may hold its lock when it calls them; nothing is
# locked, and the GIL is never waited for, under it). base and top are set by kc_region_init and
# never change after (read unlocked, as by kc_region_size). kc_region_init, kc_region_destroy:
# one thread, while no other can use r (BufferPool.__cinit__ / __dealloc__).
from libc.stdint cimport uint8_t

from kcore.sync_impl cimport kc_mutex_t


cdef extern from "region_impl.h" nogil:
    ctypedef struct kc_region:
        kc_mutex_t lock          # for the fork hook only (buffer_pool.pxd)
    int kc_region_init(kc_region* r, size_t want)
    uint8_t* kc_region_alloc(kc_region* r, size_t n)
    int kc_region_free(kc_region* r, uint8_t* p, size_t n)
    void kc_region_destroy(kc_region* r)
    size_t kc_region_size(kc_region* r)
    size_t kc_region_in_use(kc_region* r)
