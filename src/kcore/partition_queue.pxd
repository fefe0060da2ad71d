# PartitionQueue (see partition_queue.pyx): cimported by record_accumulator and batch_send.
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t

from kcore.producer_batch cimport ProducerBatch
from kcore.sync_impl cimport kc_mutex_t


# One partition's batches, oldest first: a ring of references under its own mutex. Changed
# only with the GIL held and the mutex taken; read with the GIL, or without it under the mutex.
cdef class PartitionQueue:
    cdef readonly object tp
    cdef PyObject** items
    cdef Py_ssize_t head, count, cap
    cdef int32_t leader          # as of the accumulator's last look at metadata; -1: none
    cdef bint muted              # a request is in flight and order needs one at a time
    cdef object entry_ref        # the transaction manager's state for tp, or None
    cdef PyObject* entry         # (borrowed from entry_ref, for drain() without the GIL)
    cdef kc_mutex_t lock

    cdef PyObject* at(self, Py_ssize_t i) noexcept nogil   # borrowed; 0 <= i < count
    cdef ProducerBatch last(self)                           # or None
    cdef int insert_c(self, Py_ssize_t i, ProducerBatch batch) except -1   # 0 <= i <= count
    cdef PyObject* _take_front(self) noexcept             # its reference; count > 0
    cdef ProducerBatch pop_front(self)


