# send_batch's fixed-width numpy columns (see numpy_columns.pyx): read from their buffers into
# what kcore.batch_columns' Columns point at. Cimported by batch_columns only; internal.
# Threads: called by read_columns with the GIL (the buffer loops drop it); what they fill
# belongs to the one send_batch call (batch_columns.pxd). A column's buffer is held (a
# memoryview, or a Py_buffer released when the read is done) for as long as it is read.
from libc.stdint cimport int64_t, uint8_t


# An S column (_numpy_columns.py's _NpColumn) of n records: data[0] = its buffer (record j
# is its itemsize bytes at j * itemsize, trailing NULs not dropped); returns the memoryview
# holding it, for the call to keep.
cdef object np_fixed(object col, Py_ssize_t n, str name, const uint8_t** data)

# A U column of n records: ptrs[j], lens[j] its records encoded as UTF-8 (trailing NULs
# dropped); returns the bytes they point into, for the call to keep.
cdef object np_binary(object col, const uint8_t** ptrs, Py_ssize_t* lens, Py_ssize_t n,
                      str name)

# An integer (or datetime64, viewed as int64) column of n records as a malloc'd int64 array
# (-1: null, from the mask or NaT), each checked 0..limit as given then scaled to ms by the
# column's mul / div; top: the largest. ValueError names the first record out of range.
cdef int64_t* np_ints(object col, Py_ssize_t n, str name, int64_t limit,
                      int64_t* top) except NULL
