# The interface of the routing engine (_engine.pyx): decision bits and the flat ensemble view.
from _typedefs cimport float64, int32, int64, uint8, uint32

# Decision-type bits of a split node, as in LightGBM's include/LightGBM/tree.h.
cdef enum:
    CATEGORICAL_MASK = 1     # bit 0: categorical split (threshold indexes a category bitset)
    DEFAULT_LEFT_MASK = 2    # bit 1: missing values go left
    MISSING_NONE = 0         # bits 2-3: missing type None: NaN is read as 0.0
    MISSING_ZERO = 1         #           Zero: 0.0 (|x| <= 1e-35) and NaN take the default child
    MISSING_NAN = 2          #           NaN: NaN takes the default child

# One split node, packed so that a traversal step touches one cache line.
cdef struct Node:
    float64 threshold   # numerical threshold, or categorical bitset index
    int32 feature
    int32 left          # >= 0: internal node of the same tree; < 0: leaf ~left
    int32 right
    uint8 decision      # decision-type bits
    uint8 zero_matters  # reading |x| <= 1e-35 as 0.0 can change this node's decision

# A tree ensemble (built from lightgbm_cegb.ensemble.TreeEnsemble). Nodes of tree t are
# nodes[node_offset[t] : node_offset[t + 1]], numbered locally from 0 (the root); a tree without split
# nodes is one leaf (leaf 0).
cdef struct Ensemble:
    const Node* nodes
    const int64* node_offset      # [num_trees + 1]
    const int64* cat_offset       # [num_trees]: first entry of the tree's bitset boundaries
    const int64* cat_boundaries   # per categorical bitset: its word range in cat_threshold
    const uint32* cat_threshold   # category bitsets, 32 categories per word
    int64 num_trees
    int64 trees_per_iteration
