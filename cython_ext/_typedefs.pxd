# Fixed-width types shared by the extensions. Node, leaf and feature indices are int32 as in LightGBM's
# model format; offsets into arrays flattened over all trees are int64, since a large ensemble's nodes,
# paths or bitsets can pass 2^31 entries.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

ctypedef int8_t int8
ctypedef int32_t int32
ctypedef int64_t int64
ctypedef uint8_t uint8
ctypedef uint32_t uint32
ctypedef uint64_t uint64
ctypedef double float64
