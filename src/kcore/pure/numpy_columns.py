"""send_batch's fixed-width numpy columns (pure twin of numpy_columns.pyx): ``S`` and ``U``
values and keys, integer partitions, integer and ``datetime64`` timestamps, read through
``tolist()`` into per-record lists; the same bytes and ints as the compiled twin reads from the
array's buffer.

The code is kcore/shared/numpy_columns.py (pandas unwrapped, dtypes checked, the arrays made
native-endian and C-contiguous, then _np_binary_rows / _np_int_rows), which the compiled twin
compiles into kcore.batch_columns; kcore/shared/batch_columns.py calls it for both.
"""
from kcore.shared.numpy_columns import (_np_binary_rows, _np_column,  # noqa: F401
                                        _np_int_rows, _NpColumn)

__all__ = []  # internal: kcore.pure.batch_columns'
