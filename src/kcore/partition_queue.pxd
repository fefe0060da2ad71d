# PartitionQueue (see partition_queue.pyx): cimported by record_accumulator and batch_send.
#
# Threads (the one place these rules are written; partition_queue.pyx points here):
# - items, head, count, cap (the ring, and the batch references in it): written only by a thread
#   holding both the GIL and `lock` (insert_c, _take_front, hence pop_front, clear, the deque
#   API, tp_clear). Read with the GIL (no lock needed: every writer holds the GIL), or without
#   the GIL only with `lock` held (the Sender's ready()/drain() scans: ReadyDrain._scan,
#   _select). A batch reached through at() under `lock` stays alive until `lock` is let go
#   (_take_front unlinks it under `lock`; the queue's reference is dropped after); the batch's
#   own fields follow producer_batch.pxd.
# - leader, muted, entry_ref, entry: written by the Sender thread only, with the GIL, without
#   `lock` (RecordAccumulator._refresh_leaders, mute/unmute, _give_entries). Read without the
#   GIL by the Sender thread only (its scans, `lock` held or not): it is their one writer.
#   entry borrows entry_ref; it is NULL until _give_entries ran for this queue, and every queue
#   a drain() scan reads must have it set first.
# - tp: set in __cinit__, never changed.
# - lock: held only for short sections that take no other lock and never wait for the GIL (GIL
#   holders take it). Taken after ReadyDrain._queues_lock, never before it. A fork takes it
#   (after every _queues_lock) and the child re-makes it (fork_impl.pxd; fork_obj: the hook's).
# nogil: at(i) (0 <= i < count): with the GIL, or with `lock` held.
# GIL only: last, insert_c, pop_front, _take_front (these take `lock` themselves: call them
#   without it).
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t

from kcore.fork_impl cimport kc_fork_obj
from kcore.producer_batch cimport ProducerBatch
from kcore.sync_impl cimport kc_mutex_t


# One partition's batches, oldest first: a ring of references under its own mutex.
cdef class PartitionQueue:
    cdef readonly object tp
    cdef PyObject** items
    cdef Py_ssize_t head, count, cap
    cdef int32_t leader          # as of the accumulator's last look at metadata; -1: none
    cdef bint muted              # a request is in flight and order needs one at a time
    cdef object entry_ref        # the transaction manager's state for tp, or None
    cdef PyObject* entry         # (borrowed from entry_ref, for drain() without the GIL)
    cdef kc_mutex_t lock
    cdef kc_fork_obj fork_obj

    cdef PyObject* at(self, Py_ssize_t i) noexcept nogil   # borrowed; 0 <= i < count
    cdef ProducerBatch last(self)                           # or None
    cdef int insert_c(self, Py_ssize_t i, ProducerBatch batch) except -1   # 0 <= i <= count
    cdef PyObject* _take_front(self) noexcept             # its reference; count > 0
    cdef ProducerBatch pop_front(self)


