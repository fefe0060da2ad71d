# PartitionQueue (see partition_queue.pyx): cimported by record_accumulator and batch_send.
#
# Threads (the one place these rules are written; partition_queue.pyx points here):
# - items, head, count, cap (the ring, and the batch references in it): written only under
#   `lock` (insert_c, _take_front and so pop_front/take_head, clear, the deque API, tp_clear);
#   read under `lock` (the Sender's scans, last(), front(), the deque API), which also makes
#   the references they return before letting go. On a GIL build every writer holds the GIL,
#   so last() and front() read without `lock` there. count alone: atomic (kc_store_ssize under
#   `lock`), so size_c() reads it without the lock (a hint). A batch reached through at()
#   under `lock` stays alive until `lock` is let go (the queue's reference is dropped after).
# - append_lock (ft_impl.pxd): appenders of this partition one at a time on a free-threaded
#   build (the GIL does it otherwise): send()'s append from its look at last() to its hold's
#   end, and its new batch. Not held across memory waits; taken before `lock`, never under it.
#   send_batch calls do not take it: they hold their batches (claim) across their walk.
# - A batch's hold (producer_batch.pxd `appending`): claim() takes it; free-threaded under
#   `lock`, where the Sender's take_head() closes a batch that is not held.
# - leader, muted, entry_ref, entry: written by the Sender thread only, without `lock`
#   (SendChoice._refresh_leaders and _give_entries, RecordAccumulator.mute/unmute), read by
#   it alone (its scans, `lock` held or not): it is their one writer. entry borrows
#   entry_ref; it is NULL until _give_entries ran for this queue, and every queue a drain()
#   scan reads has it set.
# - tp: set in __cinit__, never changed.
# - lock: held only for short pure-C sections (no C-API call but Py_INCREF, no other lock, no
#   wait for the GIL); GIL holders take it. Taken after SendChoice._queues_lock, never before
#   it. A fork takes it (after every _queues_lock) and the child lets it go (fork_impl.pxd;
#   fork_obj: the hook's), and resets append_lock (its holder was another thread).
# nogil: at(i) (0 <= i < count) with `lock` held; size_c() anywhere.
# With a thread state: last, front, claim, insert_c, pop_front, take_head, _take_front (these
#   take `lock` themselves: call them without it).
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t

from kcore.fork_impl cimport kc_fork_obj
from kcore.ft_impl cimport kc_ft_lock_t
from kcore.producer_batch cimport ProducerBatch
from kcore.sync_impl cimport kc_mutex_t


# One partition's batches, oldest first: a ring of references under its own mutex.
cdef class PartitionQueue:
    cdef readonly object tp
    cdef PyObject** items
    cdef Py_ssize_t head, count, cap
    cdef int32_t leader          # as of the accumulator's last look at metadata; -1: none
    cdef bint muted              # a request is in flight and order needs one at a time
    cdef object entry_ref        # the TxnPartitionMap's state for tp, or None
    cdef PyObject* entry         # (borrowed from entry_ref, for drain() without the GIL)
    cdef kc_mutex_t lock
    cdef kc_ft_lock_t append_lock
    cdef kc_fork_obj fork_obj

    cdef PyObject* at(self, Py_ssize_t i) noexcept nogil   # borrowed; 0 <= i < count
    cdef Py_ssize_t size_c(self) noexcept nogil            # count, read atomically
    cdef ProducerBatch last(self)                           # or None
    cdef ProducerBatch front(self)                          # or None
    # Hold batch for its writer (its `appending`): False if it is closed or held.
    cdef bint claim(self, ProducerBatch batch) noexcept
    # Not one open batch below batch_size: the partitioner may switch (a sticky partition's).
    cdef bint all_full(self) noexcept
    # The Sender: batch off the queue, closed, if it is still the head and not held.
    cdef bint take_head(self, ProducerBatch batch) noexcept
    # batch at i (0 <= i <= count), or by base_sequence (ordered, i < 0: a retry's place).
    cdef int insert_c(self, Py_ssize_t i, ProducerBatch batch) except -1
    cdef PyObject* _take_front(self) noexcept             # its reference, or NULL
    cdef PyObject* _unlink_front(self) noexcept nogil     # `lock` held, count > 0
    cdef ProducerBatch _ref(self, Py_ssize_t i)            # at i (-1: last) or None
    cdef list _snapshot(self)
    cdef ProducerBatch pop_front(self)


