"""Weft's datatypes and operations, and how Python array types map to them."""

from ._errors import WeftError, ERR_DATATYPE, ERR_OP

# weft_datatype_t's values (int16 and uint16 came last: the others kept theirs)
(INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64,
 INT16, UINT16) = range(12)
SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR = range(8)

NAMES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
         "float32", "float64", "int16", "uint16")
SIZES = (1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 2, 2)
OP_NAMES = ("sum", "prod", "min", "max", "avg", "band", "bor", "bxor")

# numpy typestr without the byte-order character
_TYPESTR = {"i1": INT8, "u1": UINT8, "i2": INT16, "u2": UINT16, "i4": INT32, "u4": UINT32, "i8": INT64, "u8": UINT64,
            "f2": FLOAT16, "f4": FLOAT32, "f8": FLOAT64}
# struct / buffer-protocol format characters (native sizes on Linux x86-64 and aarch64)
_FORMAT = {"b": INT8, "B": UINT8, "h": INT16, "H": UINT16, "i": INT32, "I": UINT32, "l": INT64, "L": UINT64,
           "q": INT64, "Q": UINT64, "e": FLOAT16, "f": FLOAT32, "d": FLOAT64}
_TORCH = {"torch.int8": INT8, "torch.uint8": UINT8, "torch.int16": INT16,
          "torch.uint16": UINT16, "torch.int32": INT32,
          "torch.uint32": UINT32, "torch.int64": INT64, "torch.uint64": UINT64,
          "torch.float16": FLOAT16, "torch.bfloat16": BFLOAT16, "torch.float32": FLOAT32,
          "torch.float64": FLOAT64}
_torch_cache = {}


def name(dtype):
    return NAMES[dtype] if 0 <= dtype < len(NAMES) else "datatype %d" % dtype


def check(dtype):
    """A Weft datatype from an int, a name ("float32") or a numpy/torch dtype."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if 0 <= dtype < len(NAMES):
            return dtype
        raise WeftError(ERR_DATATYPE, "unknown datatype %d" % dtype)
    s = str(dtype)
    if s in _TORCH:
        return _TORCH[s]
    s = s.replace("torch.", "")
    if s in NAMES:
        return NAMES.index(s)
    raise WeftError(ERR_DATATYPE, "no Weft datatype for %r" % (dtype,))


def check_op(op):
    """A Weft operation from an int or a name ("sum")."""
    if isinstance(op, int) and not isinstance(op, bool):
        if 0 <= op < len(OP_NAMES):
            return op
    elif isinstance(op, str) and op.lower() in OP_NAMES:
        return OP_NAMES.index(op.lower())
    raise WeftError(ERR_OP, "unknown reduction operation %r" % (op,))


def from_torch(tdtype, what):
    d = _torch_cache.get(tdtype)
    if d is None:
        d = _TORCH.get(str(tdtype))
        if d is None:
            raise WeftError(ERR_DATATYPE, "%s: torch dtype %s has no Weft datatype" %
                            (what, tdtype))
        _torch_cache[tdtype] = d
    return d


def from_typestr(typestr, np_dtype, what):
    if typestr[0] == ">":
        raise WeftError(ERR_DATATYPE, "%s: big-endian data (%s)" % (what, typestr))
    d = _TYPESTR.get(typestr[1:])
    if d is None and np_dtype is not None and getattr(np_dtype, "name", "") == "bfloat16":
        d = BFLOAT16  # ml_dtypes.bfloat16 (typestr '<V2')
    if d is None:
        raise WeftError(ERR_DATATYPE, "%s: array type %s (%s) has no Weft datatype; pass "
                        "dtype= to reinterpret it" % (what, np_dtype, typestr))
    return d


def from_format(fmt, itemsize, what):
    f = fmt.lstrip("@=<")
    d = _FORMAT.get(f)
    if d is None or SIZES[d] != itemsize:
        raise WeftError(ERR_DATATYPE, "%s: buffer format %r has no Weft datatype; pass "
                        "dtype= to reinterpret it" % (what, fmt))
    return d
