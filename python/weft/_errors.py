"""weft.WeftError and the status values of weft.h."""

SUCCESS = 0
INPROGRESS = 1
ERR_INVALID_ARG = -1
ERR_DATATYPE = -2
ERR_OP = -3
ERR_COUNT_OVERFLOW = -4
ERR_NOT_INITIALIZED = -5
ERR_INVALID_REQUEST = -6
ERR_INVALID_COMM = -7
ERR_NO_MEMORY = -8
ERR_THREAD_LEVEL = -9
ERR_MPI = -10
ERR_TIMEOUT = -11
ERR_COMM_BROKEN = -12
ERR_UNSUPPORTED = -13
ERR_ALGORITHM = -14
ERR_TUNING_FILE = -15
ERR_CUDA = -16
ERR_NCCL = -17
ERR_UCX = -18
ERR_STREAM = -19
ERR_HALO_PLAN = -20
ERR_FINALIZING = -21
ERR_INTERNAL = -99


def _describe(status):
    # Imported late: _lib loads the library, and this module must be
    # importable by _lib's users before that.
    from . import _lib
    return (_lib.weft_status_name(status).decode(), _lib.weft_strerror(status).decode())


class WeftError(RuntimeError):
    """A Weft call failed. `status` is the weft_status_t (negative), `name`
    its enumerator ("WEFT_ERR_DATATYPE"), `strerror` weft_strerror's text, and
    `context` what the Python layer was doing (the C function, or the
    argument it refused before calling Weft)."""

    def __init__(self, status, context=""):
        self.status = int(status)
        self.name, self.strerror = _describe(self.status)
        self.context = context
        msg = "%s: %s" % (self.name, self.strerror)
        if context:
            msg = "%s (%s)" % (msg, context)
        super().__init__(msg)

    def __reduce__(self):
        return (WeftError, (self.status, self.context))


def check(status, context):
    """Raise WeftError unless status is WEFT_SUCCESS."""
    if status != 0:
        raise WeftError(status, context)
