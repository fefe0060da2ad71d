# send_batch's column and batch-slot structs (see batch_send.pyx).
#
# Threads (the one place these rules are written; batch_send.pyx points here): a _Call, its
# Slot, BinChunk and BinCursor arrays and its _Placement belong to the one caller thread in
# send_batch. Its walk (_Call._walk, without the GIL) reads and writes only those; the column
# memory they point into (bytes objects and pyarrow buffers, immutable, kept alive by
# _Call.keep; every array holds exactly n records, checked with the GIL before the walk); the
# batches it holds (``appending``, set by this call: their builder and memory are its own, see
# producer_batch.pxd); and the topic's partitioner (``sticky`` as a hint, bounds-checked
# against the call's slots; _add_produced), see builtin_partitioner.pxd. It takes the GIL
# back to hold another batch, grow one, switch or widen to the sticky partition, and at the end.
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t



# One chunk of a binary column: Arrow buffers, or a pointer and a length (-1: null) a record.
cdef struct BinChunk:
    Py_ssize_t length
    const uint8_t* valid         # validity bitmap, NULL if no nulls
    Py_ssize_t voff              # its bit offset (the array's offset)
    const int32_t* off32         # offsets from the array's offset (one of off32 / off64)
    const int64_t* off64
    const uint8_t* data
    const uint8_t** ptrs         # or these two
    const Py_ssize_t* lens


# A column read in record order: chunk ci, its record pos.
cdef struct BinCursor:
    BinChunk* chunks
    Py_ssize_t nchunks, ci, pos


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
