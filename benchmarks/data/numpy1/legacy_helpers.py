"""A helper module from a NumPy 1 code base: type tests, printing and small numerics."""

import io

import numpy as np
import numpy.compat
from numpy.core.numeric import normalize_axis_tuple  # noqa: F401 - re-exported for callers
from numpy.lib.arraysetops import unique  # noqa: F401 - re-exported for callers

COMPLEX = np.complex_
LONG_FLOAT = np.longfloat
C_FLOAT = np.cfloat
BIG = np.Infinity
LOW = np.NINF
HIGH = np.PINF
MINUS_ZERO = np.NZERO
FLAG_TYPE = np.bool8
INDEX_TYPE = np.int0


@np.deprecate(message="use scaled() instead")
def scale(values, factor):
    return np.asarray(values) * factor


def scaled(values, factor):
    return np.asarray(values) * factor


def is_floating(dtype) -> bool:
    return np.issubclass_(np.dtype(dtype).type, np.floating)


def widest_float():
    return np.maximum_sctype(np.float32)


def type_code(dtype) -> str:
    return np.sctype2char(dtype)


def scalar_type(value):
    return np.obj2sctype(value)


def parse_literal(text: str):
    return np.safe_eval(text)


def memory_span(a: np.ndarray) -> tuple:
    return np.byte_bounds(a)


def show(value) -> None:
    np.disp(value)


def compact_printing() -> None:
    np.set_string_function(lambda a: f"array{a.shape}", repr=True)
    np.set_string_function(None)


def read_table(text: str):
    return np.recfromcsv(io.StringIO(text), encoding="utf-8")


def as_matrix(rows):
    return np.mat(rows)


def error_state():
    return np.geterrobj()


def transpose_copy(a: np.ndarray) -> np.ndarray:
    return np.fastCopyAndTranspose(a)


def float_types() -> list:
    return np.sctypes["float"]


def main() -> None:
    print("scaled:", scaled([1, 2], 3))
    print("deprecated:", scale([1, 2], 3))
    print("floating:", is_floating("f8"))
    print("widest:", widest_float())
    print("code:", type_code(np.float64))
    print("scalar type:", scalar_type(np.array([1.0])))
    print("literal:", parse_literal("[1, 2, 3]"))
    print("span:", memory_span(np.zeros(4)))
    show(np.arange(3))
    compact_printing()
    print("table:", read_table("a,b\n1,2\n3,4\n"))
    print("matrix:", as_matrix([[1, 2], [3, 4]]))
    print("error state:", error_state())
    print("transpose:", transpose_copy(np.arange(6).reshape(2, 3)))
    print("float types:", float_types())
    print("unique:", np.unique([3, 1, 3]), np.isinf(np.inf), np.longdouble, np.complex128)
    print("axes:", np.lib.array_utils.normalize_axis_tuple(-1, 2))


if __name__ == "__main__":
    main()
