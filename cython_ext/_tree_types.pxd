# The interface of the routing engine (_engine.pyx): decision bits and the flat ensemble view.
from _typedefs cimport float64, int32, int64, uint8, uint32

# Decision-type bits of a split node, as in LightGBM's include/LightGBM/tree.h.
cdef enum:
    CATEGORICAL_MASK = 1     # bit 0: categorical split (threshold indexes a category bitset)
    DEFAULT_LEFT_MASK = 2    # bit 1: missing values go left
    MISSING_NONE = 0         # bits 2-3: missing type None: NaN is read as 0.0
    MISSING_ZERO = 1         #           Zero: 0.0 (|x| <= 1e-35) and NaN take the default child
    MISSING_NAN = 2          #           NaN: NaN takes the default child

# A tree ensemble as flat arrays (the layout of lightgbm_cegb.ensemble.TreeEnsemble). Nodes of tree t are
# node_offset[t] .. node_offset[t + 1] - 1, numbered locally from 0 (the root); a child c >= 0 is an
# internal node, c < 0 is the leaf ~c. A tree without split nodes is one leaf (leaf 0).
cdef struct Ensemble:
    const int64* node_offset      # [num_trees + 1]
    const int32* feature          # per node: the feature tested
    const float64* threshold      # per node: numerical threshold, or categorical bitset index
    const uint8* decision         # per node: decision-type bits
    const int32* left             # per node
    const int32* right            # per node
    const int64* cat_offset       # [num_trees]: first entry of the tree's cat_boundaries
    const int64* cat_boundaries   # per categorical bitset: word range in cat_threshold (tree-local + base)
    const uint32* cat_threshold   # category bitsets, 32 categories per word
    int64 num_trees
    int64 trees_per_iteration
    bint drop_tiny                # LightGBM reads |x| <= 1e-35 as 0.0 (scikit-learn does not)

