# The routing step shared by every Cython kernel: the flat node layout of a lightgbm_cegb.Forest and the
# child a row goes to at a split node, mirroring LightGBM's Tree::NumericalDecision / CategoricalDecision
# (include/LightGBM/tree.h) and the C API's dense-row reader, which reads |x| <= kZeroThreshold as 0.0.
# Every index followed here was checked once by lightgbm_cegb/core/forest.py (Forest.__post_init__): children
# in range and acyclic, features < the number of columns, categorical thresholds and bitset ranges.
from libc.math cimport fabs, isnan

from _typedefs cimport float64, int32, int64, uint8, uint32

# Decision-type bits of a split node, as in LightGBM's include/LightGBM/tree.h.
cdef enum:
    CATEGORICAL_MASK = 1     # bit 0: categorical split (threshold indexes a category bitset)
    DEFAULT_LEFT_MASK = 2    # bit 1: missing values go left
    MISSING_NONE = 0         # bits 2-3: missing type None: NaN is read as 0.0
    MISSING_ZERO = 1         #           Zero: 0.0 (|x| <= 1e-35) and NaN take the default child
    MISSING_NAN = 2          #           NaN: NaN takes the default child


cdef inline float64 zero_threshold() noexcept nogil:
    """LightGBM's kZeroThreshold: the float literal 1e-35f widened to double."""
    return <float64> (<float> 1e-35)

# One split node, packed so that a traversal step touches one cache line.
cdef struct Node:
    float64 threshold   # numerical threshold, or categorical bitset index
    int32 feature
    int32 left          # >= 0: internal node of the same tree; < 0: leaf ~left
    int32 right
    uint8 decision      # decision-type bits
    uint8 zero_matters  # reading |x| <= 1e-35 as 0.0 can change this node's decision
    uint8 plain         # numerical, missing type None or NaN, zero_matters unset: child()'s short path
    uint8 nan_left      # for a plain node: a NaN goes left (type NaN: the default; None: NaN is read as 0.0)

# Nodes of tree t are nodes[node_offset[t] : node_offset[t + 1]], numbered locally from 0 (the root); a
# tree without split nodes is one leaf (leaf 0).
cdef struct Ensemble:
    const Node* nodes
    const int64* node_offset      # [num_trees + 1]
    const int64* cat_offset       # [num_trees]: first entry of the tree's bitset boundaries
    const int64* cat_boundaries   # per categorical bitset: its word range in cat_threshold
    const uint32* cat_threshold   # category bitsets, 32 categories per word
    int64 num_trees
    int64 trees_per_iteration


cdef inline int32 child(const Ensemble* e, int64 tree, const Node* nd, float64 fval) noexcept nogil:
    """The child of node nd that a row whose value of the node's feature is fval goes to."""
    if nd.plain:  # a NaN compares false
        return nd.left if fval <= nd.threshold or (nd.nan_left and isnan(fval)) else nd.right
    cdef uint8 d = nd.decision
    cdef int missing
    cdef int64 ival, cat, lo, hi
    cdef float64 zero = zero_threshold()
    if nd.zero_matters and fabs(fval) <= zero:
        fval = 0.0
    if d & CATEGORICAL_MASK:
        # LightGBM: NaN goes right, and so does a value whose static_cast<int> (truncation toward zero) is
        # negative: -1 and below, not -0.5 (category 0); static_cast<int> of values of 2^31 and above is
        # undefined in C++ and in practice INT_MIN there (negative): they go right too
        if isnan(fval) or fval <= -1.0 or fval >= 2147483648.0:
            return nd.right
        ival = <int64> fval
        cat = e.cat_offset[tree] + <int64> nd.threshold
        lo = e.cat_boundaries[cat]
        hi = e.cat_boundaries[cat + 1]
        if ival // 32 < hi - lo and (e.cat_threshold[lo + ival // 32] >> (ival % 32)) & 1:
            return nd.left
        return nd.right
    missing = (d >> 2) & 3
    if isnan(fval) and missing != MISSING_NAN:
        fval = 0.0
    if (missing == MISSING_ZERO and -zero <= fval <= zero) or (
            missing == MISSING_NAN and isnan(fval)):
        return nd.left if d & DEFAULT_LEFT_MASK else nd.right
    return nd.left if fval <= nd.threshold else nd.right


cdef inline int32 lane_child(const Ensemble* e, int64 tree, const Node* nd, float64 fval) noexcept nogil:
    """child() for rows routed in lanes (several rows one node per step): a plain node's child chosen without a
    branch on the direction (left and right are adjacent; a NaN compares false), so that the lanes' paths overlap
    in the processor instead of each waiting for its own mispredicted branches."""
    cdef int right
    if nd.plain:
        right = (not (fval <= nd.threshold)) & (not (nd.nan_left & (fval != fval)))
        return (&nd.left)[right]
    return child(e, tree, nd, fval)
