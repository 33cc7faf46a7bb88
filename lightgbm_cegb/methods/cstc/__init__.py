"""CSTC, the cost-sensitive tree of classifiers, and its cascades CSCC and Cronus (Zhixiang Xu, Matt J. Kusner,
Kilian Q. Weinberger, Minmin Chen and Olivier Chapelle, "Classifier Cascades and Trees for Minimizing Feature
Evaluation Cost", JMLR 2014; Minmin Chen, Zhixiang Xu, Kilian Q. Weinberger, Olivier Chapelle and Dor Kedem,
"Classifier Cascade for Minimizing Feature Evaluation Cost", AISTATS 2012).

Linear nodes on features ``phi(x)``: the raw features, or (the paper's boosting trick) the outputs of the trees
of a LightGBM model. The shape is data (:class:`Structure`): CSTC's balanced tree of ``depth`` levels in heap
order (node k's children 2k + 1, taken when ``phi.beta_k <= theta_k``, and 2k + 2), or a cascade whose node k
exits the rows with ``phi.beta_k <= theta_k`` (its prediction is theirs) and passes the others on; either is
pruned on validation data. Every node predicts ``phi.beta_k`` (an intercept included, free of cost and
penalties). Training routes softly (up with probability ``sigmoid(phi.beta_k - theta_k)`` times that of
reaching k) and minimises the paper's objective, for CSTC (eq. 12)

    sum_k [ (1/n) sum_i s_i p_ik (y_i - phi_i.beta_k)^2 + rho |beta_k|_1 ]
        + lam sum_{leaves l} p_l sum_u c_u sqrt(sum_{j on the path to l} sum_{a in u} beta_ja^2)

(``s_i`` the sample weights with mean 1, ``p_l`` the weighted mean probability of reaching l); CSCC (eq. 19)
weighs each node's loss by the probability of exiting there and sums the cost over the exits; Cronus keeps
CSCC's loss with one mixed norm over every node's weights, each scaled by the node's reach. The cost units
``u`` are the features (each a group of the phi columns that read it: with the boosting trick, the trees that
test it, the paper's F matrix), the feature groups, and with the boosting trick each tree (its evaluation
cost). Optimisation as the paper's section 3.4: block coordinate descent over the nodes in level order with
the bound ``sqrt(g) <= (g / z + z) / 2``, a leaf's weights in closed form (eq. 16), an internal node's weights
and threshold by L-BFGS on the bounded objective (analytic gradient), the bounds in closed form; a weight whose
bound falls below 1e-4 is clamped to zero for good. Initialisation top-down (each node fitted as the last of
its path), pruning bottom-up and early stopping on validation data (section 3.6.1), fine-tuning of the leaves
on their selected features (section 3.5).

One step is ours, not the paper's (``polish``, on by default): the relaxed cost charges a weight by its size,
so a node can keep a tiny weight on an expensive feature whose l0 cost is whole (the relaxation's first-order
trade is the same for a leaf that predicts with the feature and for the internal node above it). The polish
drops, node by node, each weight whose removal lowers the unrelaxed objective of eq. 3 on the training rows
(hard routing: squared error of the model plus ``lam`` times the mean l0 cost of the units each row's path
reads), the leaves re-selecting their columns each time.

Prediction routes hard; a row pays each feature (and group) read by a node on its path once, and with the
boosting trick the trees whose outputs those nodes use, exactly as LightGBM evaluates them
(``prediction_cost``, through the package's per-row cost state). With the boosting trick training charges
more coarsely than that: a used tree's every feature (the F matrix, an upper bound of what a row's way through
the tree reads) and ``costs.tree`` per tree; split costs are accounted, not optimised.
"""

from lightgbm_cegb.methods.cstc.cstc_estimators import CSCC, CSTC, Cronus, CSTCClassifier

__all__ = ["CSCC", "CSTC", "CSTCClassifier", "Cronus"]
