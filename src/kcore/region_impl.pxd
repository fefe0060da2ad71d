# The buddy allocator of region_impl.h: the BufferPool's own memory (see the header).
from libc.stdint cimport uint8_t


cdef extern from "region_impl.h" nogil:
    ctypedef struct kc_region:
        pass
    int kc_region_init(kc_region* r, size_t want)
    uint8_t* kc_region_alloc(kc_region* r, size_t n)
    int kc_region_free(kc_region* r, uint8_t* p, size_t n)
    void kc_region_destroy(kc_region* r)
    size_t kc_region_size(kc_region* r)
    size_t kc_region_in_use(kc_region* r)
