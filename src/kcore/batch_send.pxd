# send_batch's batch-slot struct (see batch_send.pyx); its column structs are in
# batch_columns.pxd.
#
# Threads (the one place these rules are written; batch_send.pyx points here): a _Call, its
# Slot array, its Columns (batch_columns.pxd) and its _Placement belong to the one caller
# thread in send_batch. Its walk (_Call._walk, without the GIL) reads and writes only those; the
# column memory they point into (bytes objects, pyarrow and numpy buffers, kept alive by
# _Call.keep, see batch_columns.pxd; every array holds exactly n records, checked with the GIL
# before the walk); the batches it holds (``appending``, set by this call: their builder and
# memory are its own, see producer_batch.pxd); and the topic's partitioner (``sticky`` as a hint, bounds-checked
# against the call's slots; _add_produced), see builtin_partitioner.pxd. It takes the GIL
# back to hold another batch, grow one, switch or widen to the sticky partition, and at the end.
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t


# The batch a call holds for one partition, and the call's records appended to it.
cdef struct Slot:
    PyObject* batch              # a ProducerBatch (a reference is held), NULL if none
    PyObject* builder            # its RecordBatchBuilder
    int32_t ordinal              # the batch's record count when held
    int64_t rank                 # the call's records appended to this partition before
    int64_t count                # the call's records appended to this batch
    Py_ssize_t added             # their size estimate
    Py_ssize_t full_at           # it is full (sendable) once this many bytes are written
    bint let_go                  # it was not when held: let go of it then
