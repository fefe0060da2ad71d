# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/partition_queue.py: one partition's batches, oldest first, as a C
ring of references under its own mutex, so that the accumulator's ready() and drain() can look
at every queue without the GIL while caller threads append. Thread rules: partition_queue.pxd."""
from cpython.ref cimport PyObject
from libc.stdlib cimport free, malloc

from kcore.fork_impl cimport kc_fork_install, kc_fork_track, kc_fork_untrack
from kcore.producer_batch cimport ProducerBatch
from kcore.sync_impl cimport kc_mutex_destroy, kc_mutex_init, kc_mutex_lock, kc_mutex_unlock

__all__ = ["PartitionQueue"]

kc_fork_install()  # at import: after buffer_pool's, before ready_drain's (fork_impl.h)

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
        kc_fork_track(&self.fork_obj, <void*>self, &self.lock, NULL, NULL)

    def __dealloc__(self):
        cdef Py_ssize_t i
        kc_fork_untrack(&self.fork_obj)
        for i in range(self.count):
            _decref(self.at(i))
        free(self.items)
        kc_mutex_destroy(&self.lock)

    cdef PyObject* at(self, Py_ssize_t i) noexcept nogil:
        return self.items[(self.head + i) % self.cap]

    cdef ProducerBatch last(self):
        return <ProducerBatch>self.at(self.count - 1) if self.count else None

    cdef int insert_c(self, Py_ssize_t i, ProducerBatch batch) except -1:
        cdef PyObject** grown = NULL
        cdef Py_ssize_t j, cap = self.cap
        if self.count == cap:
            cap = cap * 2 if cap else 4
            grown = <PyObject**>malloc(cap * sizeof(PyObject*))
            if grown == NULL:
                raise MemoryError()
        _incref(<PyObject*>batch)
        kc_mutex_lock(&self.lock)
        if grown != NULL:
            for j in range(self.count):
                grown[j] = self.at(j)
            free(self.items)
            self.items, self.head, self.cap = grown, 0, cap
        if i == 0:
            self.head = (self.head + self.cap - 1) % self.cap
        else:
            for j in range(self.count, i, -1):
                self.items[(self.head + j) % self.cap] = self.at(j - 1)
        self.items[(self.head + i) % self.cap] = <PyObject*>batch
        self.count += 1
        kc_mutex_unlock(&self.lock)
        return 0

    cdef PyObject* _take_front(self) noexcept:
        cdef PyObject* p
        kc_mutex_lock(&self.lock)
        p = self.at(0)
        self.head = (self.head + 1) % self.cap
        self.count -= 1
        kc_mutex_unlock(&self.lock)
        return p

    cdef ProducerBatch pop_front(self):
        cdef PyObject* p
        if not self.count:
            raise IndexError("pop from an empty PartitionQueue")
        p = self._take_front()
        batch = <ProducerBatch>p
        _decref(p)  # the queue's reference
        return batch

    # -- the deque API, for Python callers ---------------------------------------------------
    def __len__(self):
        return self.count

    def __getitem__(self, Py_ssize_t i):
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError("PartitionQueue index out of range")
        return <object>self.at(i)

    def __iter__(self):
        return iter([<object>self.at(i) for i in range(self.count)])

    def append(self, ProducerBatch batch):
        self.insert_c(self.count, batch)

    def appendleft(self, ProducerBatch batch):
        self.insert_c(0, batch)

    def insert(self, Py_ssize_t i, ProducerBatch batch):
        self.insert_c(min(max(i, 0), self.count), batch)

    def popleft(self):
        return self.pop_front()

    def clear(self):
        while self.count:
            self.pop_front()

    def __repr__(self):
        return "PartitionQueue(%r, %d batches)" % (self.tp, self.count)


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


