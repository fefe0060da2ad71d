"""send_batch's numpy and pandas columns (pure twin of numpy_columns.pyx): pandas unwrapped,
dtypes checked, the arrays made native-endian and C-contiguous (_np_column), ``S`` and ``U``
values and keys, integer partitions, integer and ``datetime64`` timestamps read through
``tolist()`` into per-record lists (_np_binary_rows, _np_int_rows): the same bytes and ints as
the compiled twin reads from the array's buffer.

The code is kcore/_numpy_columns.py, which the compiled twin compiles in;
kcore/_batch_columns.py (the pure batch_columns) imports it from here.
"""
from kcore._numpy_columns import (_np_binary_rows, _np_column,  # noqa: F401
                                        _np_int_rows, _NpColumn)

__all__ = []  # internal: kcore.pure.batch_columns'
