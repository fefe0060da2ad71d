"""send_batch's columns (pure twin of batch_columns.pyx): values and keys, headers, partitions
and timestamps, checked and read into per-record lists (prepare_rows) that
kcore/pure/batch_send.py's walk goes through record by record.

The code is kcore/_batch_columns.py, which the compiled twin compiles in; this twin runs
it as Python and reads pyarrow input through ``to_pylist`` and fixed-width numpy input through
``tolist`` (kcore/pure/numpy_columns.py: a reference for the compiled one, which reads the
Arrow and numpy buffers); Python sequences go through the producer's serializers.
"""
from kcore._batch_columns import check_columns, prepare_rows  # noqa: F401

__all__ = []  # internal: kcore.pure.batch_send's (it re-exports prepare_rows)
