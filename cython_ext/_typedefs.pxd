# Fixed-width types shared by the extensions. Node, leaf and feature indices are int32 as in LightGBM's
# model format; offsets into flattened per-leaf arrays are int64 because a large ensemble's paths can
# hold more than 2^31 entries (500 trees x 255 leaves x depth 30 is already 3.8M; forests grow past 2^31).
from libc.stdint cimport int32_t, int64_t, uint8_t

ctypedef int32_t int32
ctypedef int64_t int64
ctypedef uint8_t uint8
ctypedef double float64
