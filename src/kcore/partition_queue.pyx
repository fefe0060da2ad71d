# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/partition_queue.py: one partition's batches, oldest first, as a C
ring of references under its own mutex, so that the accumulator's ready() and drain() can look
at every queue without the GIL while caller threads append. Thread rules: partition_queue.pxd."""
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport PyObject
from libc.stdlib cimport free, malloc

from kcore.atomic_impl cimport (kc_load_flag, kc_load_flag_acquire, kc_load_ssize, kc_store_flag,
                                kc_store_ssize)
from kcore.fork_impl cimport kc_fork_install, kc_fork_track, kc_fork_untrack
from kcore.ft_impl cimport KC_FT, kc_ft_reset
from kcore.producer_batch cimport HELD, ProducerBatch
from kcore.sync_impl cimport kc_mutex_destroy, kc_mutex_init, kc_mutex_lock, kc_mutex_unlock

__all__ = ["PartitionQueue"]

kc_fork_install()  # at import: after buffer_pool's, before send_choice's (fork_impl.h)

cdef extern from "Python.h":
    void _incref "Py_INCREF"(PyObject* o)
    void _decref "Py_DECREF"(PyObject* o)


cdef class PartitionQueue:
    """A partition's batches, oldest first (the Java accumulator's Deque<ProducerBatch>), with
    the deque methods the accumulator's Python callers use."""

    def __cinit__(self, tp):
        self.tp = tp
        self.leader = -1
        if kc_mutex_init(&self.lock) != 0:
            raise MemoryError()
        kc_fork_track(&self.fork_obj, <void*>self, &self.lock, NULL, _reset_in_child)

    def __dealloc__(self):
        cdef Py_ssize_t i
        kc_fork_untrack(&self.fork_obj)
        for i in range(self.count):
            _decref(self.at(i))
        free(self.items)
        kc_mutex_destroy(&self.lock)

    cdef PyObject* at(self, Py_ssize_t i) noexcept nogil:
        return self.items[(self.head + i) % self.cap]

    cdef Py_ssize_t size_c(self) noexcept nogil:
        return kc_load_ssize(&self.count)

    cdef ProducerBatch last(self):
        return self._ref(-1)

    cdef ProducerBatch front(self):
        return self._ref(0)

    cdef ProducerBatch _ref(self, Py_ssize_t i):
        """The batch at i (-1: the last) as a new reference made under the lock, or None."""
        cdef PyObject* p = NULL
        if not KC_FT:  # every writer of the ring holds the GIL, as this caller does
            if not self.count:
                return None
            return <ProducerBatch>self.at(self.count - 1 if i < 0 else i)
        kc_mutex_lock(&self.lock)
        if self.count:
            p = self.at(self.count - 1 if i < 0 else i)
            _incref(p)
        kc_mutex_unlock(&self.lock)
        if p == NULL:
            return None
        batch = <ProducerBatch>p
        _decref(p)
        return batch

    cdef bint claim(self, ProducerBatch batch) noexcept:
        cdef bint ok
        if not KC_FT:  # the GIL keeps the Sender's take out
            ok = not kc_load_flag(&batch.closed) and not kc_load_flag_acquire(&batch.appending)
            if ok:
                kc_store_flag(&batch.appending, HELD)
            return ok
        kc_mutex_lock(&self.lock)  # acquire: what the last holder wrote before end_append
        ok = not kc_load_flag(&batch.closed) and not kc_load_flag_acquire(&batch.appending)
        if ok:
            kc_store_flag(&batch.appending, HELD)
        kc_mutex_unlock(&self.lock)
        return ok

    cdef bint take_head(self, ProducerBatch batch) noexcept:
        cdef PyObject* p = NULL
        kc_mutex_lock(&self.lock)
        if self.count and self.at(0) == <PyObject*>batch and \
                not kc_load_flag_acquire(&batch.appending):  # (as claim)
            kc_store_flag(&batch.closed, 1)
            p = self._unlink_front()
        kc_mutex_unlock(&self.lock)
        if p == NULL:
            return False
        _decref(p)  # the queue's; the caller has its own
        return True

    cdef bint all_full(self) noexcept:
        cdef bint full
        kc_mutex_lock(&self.lock)  # a batch in the queue and open is not built yet
        full = self.count != 1 or (<ProducerBatch>self.at(0)).is_full_c()
        kc_mutex_unlock(&self.lock)
        return full

    cdef int insert_c(self, Py_ssize_t i, ProducerBatch batch) except -1:
        cdef PyObject** grown = NULL
        cdef Py_ssize_t j, cap
        _incref(<PyObject*>batch)
        kc_mutex_lock(&self.lock)
        if self.count == self.cap:
            cap = self.cap * 2 if self.cap else 4
            grown = <PyObject**>malloc(cap * sizeof(PyObject*))  # C, not the C-API
            if grown == NULL:
                kc_mutex_unlock(&self.lock)
                _decref(<PyObject*>batch)
                raise MemoryError()
            for j in range(self.count):
                grown[j] = self.at(j)
            free(self.items)
            self.items, self.head, self.cap = grown, 0, cap
        if i < 0:  # a retry: before the first batch with no or a later sequence
            i = 0
            if batch.base_sequence >= 0:
                while i < self.count and (<ProducerBatch>self.at(i)).base_sequence >= 0 and \
                        (<ProducerBatch>self.at(i)).base_sequence < batch.base_sequence:
                    i += 1
        elif i > self.count:
            i = self.count
        if i == 0:
            self.head = (self.head + self.cap - 1) % self.cap
        else:
            for j in range(self.count, i, -1):
                self.items[(self.head + j) % self.cap] = self.at(j - 1)
        self.items[(self.head + i) % self.cap] = <PyObject*>batch
        kc_store_ssize(&self.count, self.count + 1)
        kc_mutex_unlock(&self.lock)
        return 0

    cdef PyObject* _unlink_front(self) noexcept nogil:
        cdef PyObject* p = self.at(0)  # lock held, count > 0
        self.head = (self.head + 1) % self.cap
        kc_store_ssize(&self.count, self.count - 1)
        return p

    cdef PyObject* _take_front(self) noexcept:
        cdef PyObject* p = NULL
        kc_mutex_lock(&self.lock)
        if self.count:
            p = self._unlink_front()
        kc_mutex_unlock(&self.lock)
        return p

    cdef ProducerBatch pop_front(self):
        cdef PyObject* p = self._take_front()
        if p == NULL:
            raise IndexError("pop from an empty PartitionQueue")
        batch = <ProducerBatch>p
        _decref(p)  # the queue's reference
        return batch

    # -- the deque API, for Python callers ---------------------------------------------------
    def __len__(self):
        return self.size_c()

    def __getitem__(self, Py_ssize_t i):
        cdef PyObject* p = NULL
        kc_mutex_lock(&self.lock)
        if i < 0:
            i += self.count
        if 0 <= i < self.count:
            p = self.at(i)
            _incref(p)
        kc_mutex_unlock(&self.lock)
        if p == NULL:
            raise IndexError("PartitionQueue index out of range")
        batch = <object>p
        _decref(p)
        return batch

    def __iter__(self):
        return iter(self._snapshot())

    cdef list _snapshot(self):
        """The batches now, oldest first (references made under the lock)."""
        cdef PyObject** refs = NULL
        cdef Py_ssize_t i, n = 0
        while True:
            n = self.size_c() + 4
            refs = <PyObject**>malloc(n * sizeof(PyObject*))
            if refs == NULL:
                raise MemoryError()
            kc_mutex_lock(&self.lock)
            if self.count <= n:
                n = self.count
                for i in range(n):
                    refs[i] = self.at(i)
                    _incref(refs[i])
                kc_mutex_unlock(&self.lock)
                break
            kc_mutex_unlock(&self.lock)
            free(refs)
        try:
            return [<object>refs[i] for i in range(n)]
        finally:
            for i in range(n):
                _decref(refs[i])
            free(refs)

    def append(self, ProducerBatch batch):
        self.insert_c(PY_SSIZE_T_MAX, batch)

    def appendleft(self, ProducerBatch batch):
        self.insert_c(0, batch)

    def insert(self, Py_ssize_t i, ProducerBatch batch):
        self.insert_c(max(i, 0), batch)  # past the end: appended

    def popleft(self):
        return self.pop_front()

    def clear(self):
        cdef PyObject* p = self._take_front()
        while p != NULL:
            _decref(p)
            p = self._take_front()

    def __repr__(self):
        return "PartitionQueue(%r, %d batches)" % (self.tp, self.size_c())


cdef void _reset_in_child(void* owner) noexcept nogil:
    kc_ft_reset(&(<PartitionQueue>owner).append_lock)


# The cycle collector must see the batches a queue refers to (a batch's callbacks can refer back
# to the producer that owns the queue): Cython's slots visit only the queue's object fields.
cdef extern from "Python.h":
    ctypedef int (*visitproc)(PyObject*, void*) noexcept
    ctypedef int (*traverseproc)(PyObject*, visitproc, void*) noexcept
    ctypedef int (*inquiry)(PyObject*) noexcept
    ctypedef struct _GcSlots "PyTypeObject":
        traverseproc tp_traverse
        inquiry tp_clear

cdef traverseproc _queue_traverse_fields
cdef inquiry _queue_clear_fields


cdef int _visit_queue(PyObject* o, visitproc visit, void* arg) noexcept:
    cdef Py_ssize_t i
    cdef int rc
    for i in range((<PartitionQueue>o).count):
        rc = visit((<PartitionQueue>o).at(i), arg)
        if rc:
            return rc
    return _queue_traverse_fields(o, visit, arg)


cdef int _clear_queue(PyObject* o) noexcept:
    while (<PartitionQueue>o).count:
        _decref((<PartitionQueue>o)._take_front())
    return _queue_clear_fields(o)


cdef _GcSlots* _slots = <_GcSlots*><PyObject*>PartitionQueue
_queue_traverse_fields, _queue_clear_fields = _slots.tp_traverse, _slots.tp_clear
_slots.tp_traverse, _slots.tp_clear = _visit_queue, _clear_queue


