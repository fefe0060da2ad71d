"""send_batch's numpy and pandas columns, the same in both implementations (see
kcore/___init__.py): a pandas Series or Index unwrapped (to numpy, or to the pyarrow
array behind an Arrow-backed one), a numpy array checked and, when fixed-width (``S``, ``U``,
integer, ``datetime64``), wrapped in an _NpColumn: native byte order, C-contiguous (one numpy
call if not), what its records are read as. An object array stays a sequence.

The compiled twin also reads an _NpColumn's buffer (np_binary, np_ints in
kcore/numpy_columns.pyx, no Python object per record); both twins' per-record lists
(prepare_rows) come from _np_binary_rows and _np_int_rows here, through ``tolist()``: the
reference the compiled readers give the same bytes as. Compiled into kcore.numpy_columns; its
pure twin kcore/pure/numpy_columns.py imports it; batch_columns (both twins) imports it from
the twin of its own implementation.
Neither numpy nor pandas is ever imported here: an object is told apart by its type's module.
"""
import sys

_NAT = -(1 << 63)  # numpy's NaT, as an int64
_MS = {"W": 604800000, "D": 86400000, "h": 3600000, "m": 60000, "s": 1000, "ms": 1}
_SUB_MS = {"us": 1000, "ns": 10**6, "ps": 10**9, "fs": 10**12, "as": 10**15}
_KINDS = {"values": "SU", "keys": "SU", "headers": "", "partitions": "iu",
          "timestamps": "iuM"}
_WANT = {"values": "object, S or U", "keys": "object, S or U", "headers": "object",
         "partitions": "object or an integer dtype",
         "timestamps": "object, an integer dtype or datetime64"}


class _NpColumn:
    """A fixed-width numpy column, checked: arr (native, C-contiguous; datetime64 viewed as
    int64), kind ("S", "U", "i", "u"), mask (bool array, True: null) or None, and for
    timestamps mul / div (to ms) and nat (the int64 minimum is null)."""

    def __init__(self, arr, kind, mask=None, mul=1, div=1, nat=False):
        self.arr, self.kind, self.mask = arr, kind, mask
        self.mul, self.div, self.nat = mul, div, nat

    def __len__(self):
        return len(self.arr)


def _module(obj, prefix):
    """sys.modules[prefix] if obj's type comes from that package (never imported here)."""
    mod = type(obj).__module__
    if mod == prefix or mod.startswith(prefix + "."):
        return sys.modules.get(prefix)
    return None


def _pandas(obj, name):
    """A pandas Series or Index as numpy (or pyarrow, if Arrow-backed); obj otherwise."""
    pd = _module(obj, "pandas")
    if pd is None or not isinstance(obj, (pd.Series, pd.Index)):
        return obj
    np = sys.modules["numpy"]
    dtype, arr = obj.dtype, obj.array
    if isinstance(arr, pd.arrays.ArrowExtensionArray):  # ArrowDtype, string[pyarrow]
        return arr.__arrow_array__()
    if isinstance(dtype, np.dtype):
        return obj.to_numpy()
    if isinstance(dtype, pd.DatetimeTZDtype):  # UTC, as datetime64
        return obj.to_numpy(dtype="datetime64[%s]" % dtype.unit)
    sub = getattr(dtype, "numpy_dtype", None)
    if sub is not None and sub.kind in "iu" and name in ("partitions", "timestamps"):
        data = obj.to_numpy(dtype=sub, na_value=0)  # Int64 & co.: NA is null
        return _NpColumn(data, sub.kind, np.ascontiguousarray(pd.isna(arr), dtype=bool))
    if sub is not None and sub.kind not in "OSU":
        raise TypeError("%s: a pandas Series of dtype %s is not supported (%s)"
                        % (name, dtype, _WANT[name]))
    return obj.to_numpy(dtype=object, na_value=None)


def _np_column(obj, name):
    """obj as send_batch reads it: pandas unwrapped, a fixed-width numpy array as an
    _NpColumn, an object array as is (a sequence), anything else as is. TypeError /
    ValueError for a numpy array of another dtype or shape."""
    if type(obj) is list or type(obj) is tuple:
        return obj
    obj = _pandas(obj, name)
    np = _module(obj, "numpy")
    if np is None or not isinstance(obj, np.ndarray):
        return obj
    if isinstance(obj, np.ma.MaskedArray):
        raise TypeError("%s: a numpy masked array is not supported" % name)
    if obj.ndim != 1:
        raise ValueError("%s: a numpy array must have one dimension, not %d" % (name, obj.ndim))
    kind = obj.dtype.kind
    if kind == "O":
        return obj
    if kind not in _KINDS[name]:
        raise TypeError("%s: a numpy array of dtype %s is not supported (%s)"
                        % (name, obj.dtype, _WANT[name]))
    mul = div = 1
    nat = kind == "M"
    if nat:
        unit, count = np.datetime_data(obj.dtype)
        if unit in ("Y", "M"):  # calendar units: days first
            obj = obj.astype("datetime64[D]")
            unit, count = "D", 1
        if unit in _SUB_MS:
            mul, div = count, _SUB_MS[unit]
        elif unit != "generic":  # (generic: only NaT)
            mul = _MS[unit] * count
        if not obj.dtype.isnative:
            obj = obj.astype(obj.dtype.newbyteorder("="))
        obj, kind = obj.view(np.int64), "i"
    if not obj.flags.c_contiguous or not obj.dtype.isnative:
        obj = np.ascontiguousarray(obj, dtype=obj.dtype.newbyteorder("="))
    return _NpColumn(obj, kind, None, mul, div, nat)


def _np_binary_rows(col, name):
    """An S or U column's n records as bytes (numpy's values: trailing NULs dropped; U as
    UTF-8), through tolist() (the compiled twin reads the buffer)."""
    arr = col.arr
    if col.kind == "S":
        return arr.tolist()
    _check_code_points(arr, name)
    return [s.encode("utf-8") for s in arr.tolist()]


def _check_code_points(arr, name):
    """ValueError for the first code point UTF-8 cannot encode (a surrogate, > U+10FFFF)."""
    np = sys.modules["numpy"]
    width = arr.dtype.itemsize // 4
    if not width or not len(arr):
        return
    cps = arr.view(np.uint32).reshape(len(arr), width)
    bad = (cps > 0x10FFFF) | ((cps >= 0xD800) & (cps <= 0xDFFF))
    if bad.any():
        i, j = (int(x[0]) for x in np.nonzero(bad))
        raise ValueError("%s[%d]: code point U+%04X cannot be encoded as UTF-8"
                         % (name, i, int(cps[i, j])))


def _np_int_rows(col, name, limit):
    """An integer (or datetime64) column's n records as ints or None, checked 0..limit // mul
    before scaling to ms (the message has the value as given)."""
    rows = col.arr.tolist()
    if col.mask is not None:
        rows = [None if m else v for v, m in zip(rows, col.mask.tolist())]
    nat = _NAT if col.nat else None
    mul, div = col.mul, col.div
    for i, v in enumerate(rows):
        if v is None or v == nat:
            rows[i] = None
        elif not 0 <= v <= limit // mul:
            raise ValueError("%s[%d] is out of range: %d" % (name, i, v))
        elif mul != div:
            rows[i] = v * mul // div
    return rows
