"""Small image utilities on raw 16-bit frames (NumPy 1 code)."""

import io

import numpy as np
from numpy import float_  # noqa: F401 - re-exported for callers

FRAME_SHAPE = (32, 48)
LABEL_TYPE = np.string_
NOTE_TYPE = np.unicode_


def synthetic_raw(seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4096, size=FRAME_SHAPE).astype(">u2").tobytes()


def decode_frame(raw: bytes) -> np.ndarray:
    """A big-endian 16-bit frame as floats in native byte order."""
    frame = np.frombuffer(raw, dtype=">u2").reshape(FRAME_SHAPE)
    return frame.astype(frame.dtype.newbyteorder("=")).astype(np.float64)


def swapped_view(raw: bytes) -> np.ndarray:
    frame = np.frombuffer(raw, dtype=">u2").reshape(FRAME_SHAPE)
    return frame.newbyteorder()


def as_floats(values) -> np.ndarray:
    return np.asfarray(values)


def normalise(frame: np.ndarray) -> np.ndarray:
    low, high = frame.min(), frame.max()
    return (frame - low) / (high - low)


def stitch(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return np.row_stack([left, right])


def flatten(frame: np.ndarray) -> np.ndarray:
    return np.reshape(frame, newshape=(-1,))


def percentile_cut(frame: np.ndarray) -> tuple:
    ordered = np.msort(frame.ravel())
    return ordered[len(ordered) // 100], ordered[-len(ordered) // 100]


def stretch(frame: np.ndarray) -> np.ndarray:
    ordered = np.sort(frame.ravel())
    low, high = ordered[len(ordered) // 100], ordered[-len(ordered) // 100]
    return np.clip((frame - low) / (high - low), 0.0, 1.0)


def mark_hot_pixel(frame: np.ndarray) -> np.ndarray:
    marked = frame.copy()
    marked.itemset((0, 0), 1.0)
    return marked


def to_bytes(frame: np.ndarray) -> bytes:
    quantised = (normalise(frame) * 255).astype(np.uint8)
    return quantised.tostring()


def joint_histogram(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    counts, _, _ = np.histogram2d(a.ravel(), b.ravel(), bins=8, normed=True)
    return counts


def common_dtype(a: np.ndarray, b: np.ndarray) -> np.dtype:
    return np.find_common_type([a.dtype, b.dtype], [])


def labels(count: int) -> np.ndarray:
    return np.array([f"frame{i}" for i in range(count)], dtype=LABEL_TYPE)


def notes(count: int) -> np.ndarray:
    return np.array(["ok"] * count, dtype=NOTE_TYPE)


def as_float32(values) -> np.ndarray:
    return np.cast["f4"](values)


def main() -> None:
    raw = synthetic_raw()
    frame = decode_frame(raw)
    print("swapped:", swapped_view(raw))
    print("floats:", as_floats([1, 2, 3]))
    pair = stitch(frame, frame[::-1])
    print("stitched:", pair.shape)
    print("flat:", flatten(frame))
    print("cut:", percentile_cut(frame))
    print("stretched mean:", round(float(stretch(frame).mean()), 3))
    print("hot pixel:", mark_hot_pixel(normalise(frame)))
    print("bytes:", to_bytes(frame))
    print("joint histogram:", joint_histogram(frame, frame[::-1].copy()))
    print("common dtype:", common_dtype(np.zeros(2, np.int16), np.zeros(2, np.float32)))
    print("labels:", labels(3), notes(3))
    print("float32:", as_float32([1, 2, 3]))
    buffer = io.BytesIO()
    np.save(buffer, frame)
    print("saved bytes:", buffer.getbuffer().nbytes)
    print("byte order:", np.dtype(">f8").newbyteorder("<").str)


if __name__ == "__main__":
    main()
