"""CSTC, the cost-sensitive tree of classifiers (Xu, Kusner, Weinberger, Chen and Chapelle, JMLR 2014;
SEEDS.md section 5).

A tree of linear nodes on features ``phi(x)``: the raw features, or (the paper's boosting trick) the outputs of
the trees of a LightGBM model. Nodes are numbered in heap order (node k's children are 2k + 1, taken when
``phi.beta_k <= theta_k``, and 2k + 2); a balanced tree of ``depth`` levels, possibly pruned on validation data.
Every node predicts ``phi.beta_k`` (an intercept included, free of cost and penalties); a leaf's prediction is
the model's. Training routes softly (the upper child with probability ``sigmoid(phi.beta_k - theta_k)`` times
that of reaching k) and minimises the paper's objective (eq. 12)

    sum_k [ (1/n) sum_i s_i p_ik (y_i - phi_i.beta_k)^2 + rho |beta_k|_1 ]
        + lam sum_{leaves l} p_l sum_u c_u sqrt(sum_{j on the path to l} sum_{a in u} beta_ja^2)

(``s_i`` the sample weights with mean 1, ``p_l`` the weighted mean probability of reaching l). The cost units
``u`` are the features (each a group of the phi columns that read it: with the boosting trick, the trees that
test it, the paper's F matrix), the feature groups, and with the boosting trick each tree (its evaluation
cost). Optimisation as the paper's section 3.4: block coordinate descent over the nodes in level order with
the bound ``sqrt(g) <= (g / z + z) / 2``, a leaf's weights in closed form (eq. 16), an internal node's weights
and threshold by L-BFGS on the bounded objective (analytic gradient), the bounds in closed form; a weight whose
bound falls below 1e-4 is clamped to zero for good. Initialisation top-down (each node fitted as a leaf given
its ancestors), pruning bottom-up on validation data (section 3.6.1), fine-tuning of the leaves on their
selected features (section 3.5).

One step is ours, not the paper's (``polish``, on by default): the relaxed cost charges a weight by its size,
so a node can keep a tiny weight on an expensive feature whose l0 cost is whole (the relaxation's first-order
trade is the same for a leaf that predicts with the feature and for the internal node above it). The polish
drops, node by node, each weight whose removal lowers the unrelaxed objective of eq. 3 on the training rows
(hard routing: squared error of the model plus ``lam`` times the mean exact cost), the leaves re-fitted each
time.

Prediction routes hard; a row pays each feature (and group) read by a node on its path once, and with the
boosting trick the trees whose outputs those nodes use, exactly as LightGBM evaluates them
(:meth:`CSTC.prediction_cost`, through the package's per-row cost state).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import lightgbm as lgb
import numpy as np
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ._io import write_atomically
from .accounting import CostReport
from .cost_state import CostState
from .costs import FeatureCosts, resolve_costs
from .errors import CEGBError, check_number
from .models import booster_of, to_forest

__all__ = ["CSTC", "CSTCClassifier"]

CLAMP = 1e-4  # the paper's: a bound below this clamps its weight to zero


def node_path(node: int) -> list[int]:
    """The nodes from the root to ``node`` (heap order)."""
    out = [node]
    while node > 0:
        node = (node - 1) // 2
        out.append(node)
    return out[::-1]


class Units:
    """The cost units of the relaxation: unit u costs ``cost[u]`` and is paid by a path that puts a non-zero
    weight on any phi column of ``member[u]`` (bool, units x columns)."""

    def __init__(self, cost: np.ndarray, member: np.ndarray) -> None:
        keep = (cost > 0) & member.any(axis=1)
        self.cost = np.asarray(cost, dtype=np.float64)[keep]
        self.member = np.asarray(member, dtype=bool)[keep]
        self.M = self.member.astype(np.float64)

    def norms2(self, sq: np.ndarray) -> np.ndarray:
        """Per unit, the sum of ``sq`` (per column) over its members."""
        return self.M @ sq

    def path_cost(self, used: np.ndarray) -> float:
        """The exact (l0) cost of a path that reads the columns ``used`` (bool per column)."""
        return float(self.cost[(self.member & used).any(axis=1)].sum())


class Problem:
    """The training problem: ``Z`` (rows, 1 + columns; column 0 the intercept), targets, sample weights ``s``
    (mean 1), cost units, ``lam``, ``rho``; weights ``beta`` (nodes, 1 + columns) and thresholds ``theta`` of a
    balanced tree of ``depth`` levels whose live nodes are ``alive`` (a live node without live children is a
    leaf)."""

    def __init__(self, Z: np.ndarray, y: np.ndarray, s: np.ndarray, units: Units, depth: int, lam: float,
                 rho: float) -> None:
        self.Z, self.y, self.s = Z, y, s
        self.n, self.d = Z.shape
        self.units, self.lam, self.rho = units, lam, rho
        self.num_nodes = 2 ** depth - 1
        self.beta = np.zeros((self.num_nodes, self.d))
        self.theta = np.zeros(self.num_nodes)
        self.alive = np.ones(self.num_nodes, dtype=bool)
        self.frozen = np.zeros((self.num_nodes, self.d), dtype=bool)  # weights clamped to zero for good

    # ----------------------------------------------------------------------------------- structure

    def is_leaf(self, k: int) -> bool:
        return self.alive[k] and (2 * k + 1 >= self.num_nodes or not self.alive[2 * k + 1])

    @property
    def nodes(self) -> list[int]:
        return [k for k in range(self.num_nodes) if self.alive[k]]

    @property
    def leaves(self) -> list[int]:
        return [k for k in range(self.num_nodes) if self.is_leaf(k)]

    def reach(self, beta: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p_ik, sigma_ik): the probability of reaching each node, of going up at each internal node."""
        Z = self.Z
        P = np.zeros((Z.shape[0], self.num_nodes))
        S = np.zeros_like(P)
        P[:, 0] = 1.0
        for k in self.nodes:
            if not self.is_leaf(k):
                S[:, k] = expit(Z @ beta[k] - theta[k])
                P[:, 2 * k + 1] = P[:, k] * (1 - S[:, k])
                P[:, 2 * k + 2] = P[:, k] * S[:, k]
        return P, S

    def hard_leaf(self, Z: np.ndarray) -> np.ndarray:
        """The leaf each row of ``Z`` reaches by hard routing (up when ``z.beta_k > theta_k``)."""
        beta, theta = self.beta, self.theta
        node = np.zeros(Z.shape[0], dtype=np.int64)
        while True:
            inner = np.flatnonzero([not self.is_leaf(k) for k in node])
            if inner.size == 0:
                return node
            k = node[inner]
            score = np.einsum("ij,ij->i", Z[inner], beta[k])
            node[inner] = 2 * k + 1 + (score > theta[k])

    # ----------------------------------------------------------------------------------- objective

    def _path_sq(self, beta: np.ndarray) -> dict[int, np.ndarray]:
        """Per leaf, the unit norms^2 of its path's weights."""
        sq = beta[:, 1:] ** 2
        return {l: self.units.norms2(sq[node_path(l)].sum(axis=0)) for l in self.leaves}

    def objective(self, beta: np.ndarray | None = None, theta: np.ndarray | None = None, bounds=None) -> float:
        """Eq. 12; with ``bounds`` = (gamma per node and column, eta per leaf and unit) its variational upper
        bound."""
        return self._evaluate(beta, theta, bounds, gradient=False)[0]

    def gradient(self, beta: np.ndarray | None = None, theta: np.ndarray | None = None, bounds=None):
        """(objective, d/d beta, d/d theta) of the bounded objective (``bounds`` required)."""
        return self._evaluate(beta, theta, bounds, gradient=True)

    def _evaluate(self, beta, theta, bounds, gradient: bool):
        beta = self.beta if beta is None else beta
        theta = self.theta if theta is None else theta
        nodes, leaves = self.nodes, self.leaves
        P, S = self.reach(beta, theta)
        R = self.Z @ beta[nodes].T - self.y[:, None]
        V = np.zeros((self.n, self.num_nodes))  # per row, the node's share of the objective (times p_ik)
        V[:, nodes] = self.s[:, None] * R ** 2 / self.n
        w = beta[:, 1:]
        total = 0.0
        if bounds is None:
            total += self.rho * float(np.abs(w[nodes]).sum())
        else:
            gamma, eta = bounds
            total += self.rho * float(np.sum((w[nodes] ** 2 / gamma[nodes] + gamma[nodes]) / 2))
        path_sq = self._path_sq(beta)
        path_cost = {}
        for l in leaves:
            g = path_sq[l]
            path_cost[l] = float(self.units.cost @ (np.sqrt(g) if bounds is None else (g / eta[l] + eta[l]) / 2))
            V[:, l] += self.lam * self.s * path_cost[l] / self.n
        total += float(np.sum(P * V))
        if not gradient:
            return total, None, None
        gamma, eta = bounds
        g_beta = np.zeros_like(beta)
        g_theta = np.zeros_like(theta)
        g_beta[nodes] = 2 / self.n * ((self.s[:, None] * P[:, nodes] * R).T @ self.Z)
        g_beta[nodes, 1:] += self.rho * w[nodes] / gamma[nodes]
        p_bar = (self.s[:, None] * P).mean(axis=0)
        for l in leaves:
            per_column = self.units.M.T @ (self.units.cost / eta[l])  # d cost / d (w_ja^2 / 2) on path l
            for j in node_path(l):
                g_beta[j, 1:] += self.lam * p_bar[l] * per_column * w[j]
        U = P * V  # subtree sums, bottom-up
        for k in reversed(nodes):
            if not self.is_leaf(k):
                up, low = U[:, 2 * k + 2].copy(), U[:, 2 * k + 1].copy()
                U[:, k] += up + low
                ds = (1 - S[:, k]) * up - S[:, k] * low
                g_beta[k] += ds @ self.Z
                g_theta[k] = -ds.sum()
        return total, g_beta, g_theta

    def tight_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The bounds at which the variational bound equals eq. 12 at the current weights (floored at CLAMP)."""
        gamma = np.maximum(np.abs(self.beta[:, 1:]), CLAMP)
        eta = np.zeros((self.num_nodes, len(self.units.cost)))
        for l, g in self._path_sq(self.beta).items():
            eta[l] = np.maximum(np.sqrt(g), CLAMP)
        return gamma, eta

    def _clamp(self, k: int) -> None:
        """Node k's weights whose bound sits at the floor (|beta| < CLAMP) are zero for good."""
        self.frozen[k, 1:] |= np.abs(self.beta[k, 1:]) < CLAMP
        self.beta[k, self.frozen[k]] = 0.0

    # ----------------------------------------------------------------------------------- steps

    def fit_as_leaf(self, k: int, rounds: int, *, start: float | None = None) -> None:
        """Eq. 16 for node k as the leaf of the path to it (its descendants cut off), alternated with its bounds:
        ``beta = (Z' Omega Z + n/2 diag(rho / gamma + lam p_k Q))^-1 Z' Omega y``, Omega = diag(s_i p_ik), Q the
        column's share of the path's bounded unit costs. ``start``: the bounds' first value (None: from the
        current weights)."""
        path = node_path(k)
        omega = self.s * self.reach(self.beta, self.theta)[0][:, k]
        p_k = omega.mean()

        def ridge(r: int) -> np.ndarray:
            if r == 0 and start is not None:
                gamma = np.full(self.d - 1, start)
                eta = np.full(len(self.units.cost), start)
            else:
                w = self.beta[:, 1:]
                gamma = np.maximum(np.abs(w[k]), CLAMP)
                eta = np.maximum(np.sqrt(self.units.norms2((w[path] ** 2).sum(axis=0))), CLAMP)
            return self.rho / gamma + self.lam * p_k * (self.units.M.T @ (self.units.cost / eta))

        self._weighted_ridge(k, omega, rounds, ridge)
        self._clamp(k)

    def _weighted_ridge(self, k: int, omega: np.ndarray, rounds: int, ridge) -> None:
        """Node k's live weights: ``rounds`` times ``(Z' Omega Z + n/2 diag(0, ridge(r)))^-1 Z' Omega y``, ``ridge(r)``
        (per column) read from the weights of the round before."""
        live = ~self.frozen[k]
        A0 = self.Z[:, live].T @ (self.Z[:, live] * omega[:, None])
        b = self.Z[:, live].T @ (omega * self.y)
        jitter = 1e-10 * np.trace(A0) / self.d * np.eye(int(live.sum()))
        for r in range(rounds):
            A = A0 + self.n / 2 * np.diag(np.append(0.0, ridge(r))[live]) + jitter
            self.beta[k] = 0.0
            self.beta[k, live] = np.linalg.solve(A, b)

    def initialise(self) -> None:
        """Top-down: each node fitted as a leaf given its ancestors (bounds starting at 1), an internal node's
        threshold in the widest gap of its scores between their 20% and 80% weighted quantiles."""
        for k in self.nodes:
            self.fit_as_leaf(k, 10, start=1.0)
            if not self.is_leaf(k):
                weight = self.s * self.reach(self.beta, self.theta)[0][:, k]
                rows = np.flatnonzero(weight > 0)
                if rows.size < 2:
                    continue
                score = self.Z[rows] @ self.beta[k]
                order = np.argsort(score, kind="stable")
                score, mass = score[order], np.cumsum(weight[rows][order]) / weight.sum()
                inside = np.flatnonzero((mass[:-1] >= 0.2) & (mass[:-1] <= 0.8))  # cuts after row j
                if inside.size == 0:
                    inside = np.array([min(int(np.searchsorted(mass, 0.5)), rows.size - 2)])
                at = int(inside[np.argmax(score[inside + 1] - score[inside])])
                self.theta[k] = float(score[at] + score[at + 1]) / 2

    def update(self, k: int, rounds: int = 3) -> None:
        """One block step on node k: a leaf by eq. 16 with its bounds; an internal node's live weights and its
        threshold by L-BFGS on the bounded objective, alternated with the bounds."""
        if self.is_leaf(k):
            self.fit_as_leaf(k, rounds)
            return
        for _ in range(rounds):
            bounds = self.tight_bounds()
            live = ~self.frozen[k]

            def f(v: np.ndarray):
                beta, theta = self.beta.copy(), self.theta.copy()
                beta[k, live], theta[k] = v[:-1], v[-1]
                value, g_beta, g_theta = self.gradient(beta, theta, bounds)
                return value, np.append(g_beta[k, live], g_theta[k])

            start = np.append(self.beta[k, live], self.theta[k])
            result = minimize(f, start, jac=True, method="L-BFGS-B", options={"maxiter": 50})
            if result.fun < f(start)[0]:
                self.beta[k, live], self.theta[k] = result.x[:-1], result.x[-1]
            self._clamp(k)

    # ----------------------------------------------------------------------------------- after BCD

    def fine_tune(self) -> None:
        """Section 3.5: each leaf's squared loss (and l1 penalty) re-minimised on the columns it already uses,
        without the cost term, over the rows hard routing sends it (ours: the paper weighs rows by p_ik, and the
        few rows of other regions that a sigmoid still leaks can pull a leaf's weights far off)."""
        leaf_of = self.hard_leaf(self.Z)
        for k in self.leaves:
            omega = self.s * (leaf_of == k)
            if omega.any():
                self._weighted_ridge(k, omega, 10 if self.rho > 0 else 1,
                                     lambda r, k=k: self.rho / np.maximum(np.abs(self.beta[k, 1:]), CLAMP))

    def exact_objective(self) -> float:
        """Eq. 3 on the training rows under hard routing: the weighted squared error plus lam times the mean
        exact cost of the units each row's path reads."""
        beta = self.beta
        leaf = self.hard_leaf(self.Z)
        pred = np.einsum("ij,ij->i", self.Z, beta[leaf])
        total = float(np.mean(self.s * (pred - self.y) ** 2))
        for l in np.unique(leaf):
            used = (beta[node_path(int(l)), 1:] != 0).any(axis=0)
            total += self.lam * float(self.s[leaf == l].sum()) / self.n * self.units.path_cost(used)
        return total

    def _subtree(self, k: int) -> list[int]:
        out, todo = [], [k]
        while todo:
            j = todo.pop()
            if j < self.num_nodes and self.alive[j]:
                out.append(j)
                todo += [2 * j + 1, 2 * j + 2]
        return sorted(out)

    def _ls(self, rows: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, float]:
        """(weights, weighted squared error / n) of least squares on ``rows`` over the intercept and ``columns``."""
        Zc = self.Z[np.ix_(rows, np.append(0, columns))]
        sw = np.sqrt(self.s[rows])
        coef = np.linalg.lstsq(Zc * sw[:, None], self.y[rows] * sw, rcond=None)[0]
        return coef, float(np.sum(self.s[rows] * (Zc @ coef - self.y[rows]) ** 2)) / self.n

    def select_leaf(self, k: int, rows: np.ndarray) -> None:
        """Leaf k's columns chosen for ``exact_objective`` over ``rows`` (those hard routing sends it): every
        column its ancestors' units already pay for, then forward selection, each step the column of the best
        true gain (squared error saved minus lam times the share of rows times the units it newly pays) among the
        five that a matching-pursuit score ranks first, while that gain is positive."""
        self.beta[k] = 0.0
        self.frozen[k] = True
        self.frozen[k, 0] = False
        if rows.size == 0:
            return
        used = (self.beta[node_path(k)[:-1], 1:] != 0).any(axis=0)
        paid = (self.units.member & used).any(axis=1)
        share = float(self.s[rows].sum()) / self.n

        def price(a: int) -> float:
            return float(self.units.cost[self.units.member[:, a] & ~paid].sum())

        columns = [a for a in range(self.d - 1) if price(a) == 0]
        coef, err = self._ls(rows, np.array(columns, dtype=np.int64) + 1)
        Zr = self.Z[rows, 1:]
        norm2 = np.einsum("ij,ij->j", Zr * self.s[rows, None], Zr)
        while True:
            residual = self.y[rows] - self.Z[np.ix_(rows, np.append(0, np.array(columns, dtype=np.int64) + 1))] @ coef
            score = (self.s[rows] * residual) @ Zr
            score = score ** 2 / np.maximum(norm2, 1e-300) / self.n
            prices = np.array([price(a) for a in range(self.d - 1)])
            score -= self.lam * share * prices
            score[columns] = -np.inf
            best = None
            for a in np.argsort(-score)[:5]:
                if not np.isfinite(score[a]):
                    break
                trial = columns + [int(a)]
                c, e = self._ls(rows, np.array(trial, dtype=np.int64) + 1)
                gain = err - e - self.lam * share * prices[a]
                if gain > 1e-12 * max(err, 1e-300) and (best is None or gain > best[0]):
                    best = (gain, int(a), c, e)
            if best is None:
                break
            _, a, coef, err = best
            columns.append(a)
            paid |= self.units.member[:, a]
        support = np.append(0, np.array(columns, dtype=np.int64) + 1)
        self.beta[k, support] = coef
        self.frozen[k, support] = False

    def select_leaves(self, leaves: list[int]) -> None:
        leaf_of = self.hard_leaf(self.Z)
        for k in leaves:
            self.select_leaf(k, np.flatnonzero(leaf_of == k))

    def polish(self, passes: int = 3) -> None:
        """Local search for ``exact_objective``: the leaves' columns re-selected (``select_leaf``); then, in level
        order, for each internal node k and column a it reads, drop a from k alone or from k and its internal
        descendants (intercepts re-centred over the rows reaching each node), the leaves below re-selected; keep
        what lowers the objective."""
        best = self.exact_objective()
        saved = self.beta.copy(), self.frozen.copy()
        self.select_leaves(self.leaves)
        value = self.exact_objective()
        if value < best:
            best = value
        else:
            self.beta, self.frozen = saved
        for _ in range(passes):
            improved = False
            for k in [k for k in self.nodes if not self.is_leaf(k)]:
                subtree = self._subtree(k)
                below = [j for j in subtree if self.is_leaf(j)]
                for nodes in ([k], [j for j in subtree if not self.is_leaf(j)]):
                    for a in np.flatnonzero(self.beta[k, 1:] != 0) + 1:
                        saved = self.beta.copy(), self.frozen.copy()
                        P = self.reach(self.beta, self.theta)[0]
                        for j in nodes:
                            weight = self.s * P[:, j]
                            self.beta[j, 0] += self.beta[j, a] * float(weight @ self.Z[:, a]) / max(weight.sum(), 1e-300)
                            self.beta[j, a] = 0.0
                            self.frozen[j, a] = True
                        self.select_leaves(below)
                        value = self.exact_objective()
                        if value < best - 1e-9 * max(1.0, abs(best)):
                            best, improved = value, True
                        else:
                            self.beta, self.frozen = saved
            if not improved:
                return

    def prune(self, Z_valid: np.ndarray, y_valid: np.ndarray, s_valid: np.ndarray) -> None:
        """Section 3.6.1, bottom-up: a node whose children are both leaves becomes a leaf (its initial weights,
        fitted as a leaf) when that does not raise the validation squared error under hard routing."""

        def error() -> float:
            leaf = self.hard_leaf(Z_valid)
            return float(np.sum(s_valid * (np.einsum("ij,ij->i", Z_valid, self.beta[leaf]) - y_valid) ** 2))

        changed = True
        while changed:
            changed = False
            for k in reversed(self.nodes):
                if self.is_leaf(k) or not (self.is_leaf(2 * k + 1) and self.is_leaf(2 * k + 2)):
                    continue
                before = error()
                self.alive[[2 * k + 1, 2 * k + 2]] = False
                if error() <= before:
                    changed = True
                else:
                    self.alive[[2 * k + 1, 2 * k + 2]] = True


class _Phi:
    """phi(x) and the cost units: the raw features (``forest`` None), or the outputs of a LightGBM model's
    trees (the boosting trick)."""

    def __init__(self, costs: FeatureCosts, num_features: int, forest=None) -> None:
        self.forest = forest
        lazy, _, _ = costs.arrays(num_features)
        group_of, group_lazy, _ = costs.group_arrays(num_features)
        groups = np.zeros((len(group_lazy), num_features), dtype=bool)
        groups[group_of[group_of >= 0], np.flatnonzero(group_of >= 0)] = True
        if forest is None:
            F = np.eye(num_features, dtype=bool)  # feature x column
            units = [(lazy, F), (group_lazy, groups)]
        else:
            F = np.zeros((num_features, forest.num_trees), dtype=bool)
            for t in range(forest.num_trees):
                F[forest.feature[forest.node_offset[t]:forest.node_offset[t + 1]], t] = True
            units = [(lazy, F), (group_lazy, (groups.astype(np.int64) @ F) > 0),
                     (np.full(forest.num_trees, costs.tree), np.eye(forest.num_trees, dtype=bool))]
        self.F = F
        self.units = Units(np.concatenate([u[0] for u in units]), np.vstack([u[1] for u in units]))

    @property
    def num_columns(self) -> int:
        return self.F.shape[1]

    def design(self, X) -> np.ndarray:
        """[1, phi(X)]."""
        phi = np.asarray(X, dtype=np.float64) if self.forest is None else \
            self.forest.leaf_values(X, self.forest.apply(X))
        return np.hstack([np.ones((phi.shape[0], 1)), phi])


class _CSTCBase(BaseEstimator):
    """The shared estimator: parameters, fit, routing, cost, files."""

    def __init__(self, *, depth: int = 3, lam: float = 0.01, rho: float = 0.0, costs=None, phi=None,
                 n_iter: int = 10, tol: float = 1e-6, polish: bool = True, random_state: int | None = None) -> None:
        self.depth = depth
        self.lam = lam
        self.rho = rho
        self.costs = costs
        self.phi = phi
        self.n_iter = n_iter
        self.tol = tol
        self.polish = polish
        self.random_state = random_state

    # ------------------------------------------------------------------------------------- fitting

    def _check_params(self) -> None:
        check_number(self.depth, "depth", 1, 16, integer=True)
        check_number(self.lam, "lam", 0.0, math.inf)
        check_number(self.rho, "rho", 0.0, math.inf)
        check_number(self.n_iter, "n_iter", 0, math.inf, integer=True)
        check_number(self.tol, "tol", 0.0, math.inf)
        if not isinstance(self.polish, bool):
            raise CEGBError(f"polish should be True or False, got {self.polish!r}")
        if not (self.phi is None or isinstance(self.phi, (lgb.Booster, lgb.LGBMModel)) or
                (isinstance(self.phi, int) and not isinstance(self.phi, bool) and self.phi >= 1)):
            raise CEGBError("phi should be None (the raw features), a LightGBM Booster or fitted LightGBM model "
                            f"(the outputs of its trees) or a number of trees >= 1 to train, got {self.phi!r}")

    def _validated(self, X, reset: bool = False) -> np.ndarray:
        return validate_data(self, X, reset=reset, **self._reading(), ensure_min_samples=2 if reset else 1)

    def _reading(self) -> dict:
        """How X is read: linear nodes on the raw features need finite dense X; tree outputs read NaN and sparse
        X as LightGBM does."""
        return {"dtype": np.float64} if self.phi is None else \
            {"dtype": np.float64, "ensure_all_finite": "allow-nan", "accept_sparse": ["csr", "csc"]}

    def _make_phi(self, X: np.ndarray, target: np.ndarray, weight: np.ndarray) -> _Phi:
        if self.phi is None:
            return _Phi(self.costs_, X.shape[1])
        if isinstance(self.phi, int):
            params = {"objective": self._phi_objective, "num_leaves": 8, "learning_rate": 0.1, "verbose": -1,
                      "seed": 0 if self.random_state is None else int(self.random_state), "deterministic": True,
                      "num_threads": 1}
            label = (target > 0).astype(np.float64) if self._phi_objective == "binary" else target
            booster = lgb.train(params, lgb.Dataset(X, label, weight=weight), self.phi)
        else:
            booster = booster_of(self.phi)
        if booster.num_feature() != X.shape[1]:
            raise CEGBError(f"phi: the LightGBM model reads {booster.num_feature()} features, X has {X.shape[1]}")
        self.phi_booster_ = booster
        return _Phi(self.costs_, X.shape[1], to_forest(booster))

    def _fit(self, X, target: np.ndarray, sample_weight, eval_set) -> _CSTCBase:
        self._check_params()
        names = [str(n) for n in getattr(self, "feature_names_in_", [])] or None
        d = X.shape[1]
        self.costs_ = resolve_costs(FeatureCosts(lazy=np.ones(d)) if self.costs is None else self.costs, d, names)
        weight = _weights(sample_weight, len(target), "sample_weight")
        self.phi_booster_ = None
        phi = self._make_phi(X, target, weight)
        problem = Problem(phi.design(X), target, weight / weight.mean(), phi.units, self.depth, self.lam, self.rho)
        problem.initialise()
        if eval_set is not None:
            if not (isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3)):
                raise CEGBError("eval_set should be (X_valid, y_valid) or (X_valid, y_valid, sample_weight_valid), "
                                f"got {type(eval_set).__name__}")
            X_valid = self._validated(eval_set[0])
            y_valid = self._target(np.asarray(eval_set[1]), "eval_set's labels")
            if len(y_valid) != X_valid.shape[0]:
                raise CEGBError(f"eval_set: {X_valid.shape[0]} rows but {len(y_valid)} labels")
            problem.prune(phi.design(X_valid), y_valid,
                          _weights(eval_set[2] if len(eval_set) == 3 else None, len(y_valid), "eval_set's weights"))
        previous = problem.objective()
        self.n_iter_ = 0
        for _ in range(self.n_iter):
            for k in problem.nodes:
                problem.update(k)
            self.n_iter_ += 1
            value = problem.objective()
            if previous - value <= self.tol * max(abs(previous), 1e-300):
                break
            previous = value
        self.objective_ = problem.objective()
        problem.fine_tune()
        if self.polish:
            problem.polish()
        self.coef_, self.threshold_, self.alive_ = problem.beta.copy(), problem.theta.copy(), problem.alive.copy()
        self._phi_ = phi
        return self

    # ---------------------------------------------------------------------------------- prediction

    def _phi(self) -> _Phi:
        check_is_fitted(self, "coef_")
        return self._phi_

    def _tree(self) -> Problem:
        """A Problem holding the fitted tree (for routing)."""
        tree = Problem(np.zeros((0, self.coef_.shape[1])), np.zeros(0), np.zeros(0), self._phi().units,
                       int(round(math.log2(len(self.alive_) + 1))), 0.0, 0.0)
        tree.beta, tree.theta, tree.alive = self.coef_, self.threshold_, self.alive_
        return tree

    def apply(self, X) -> np.ndarray:
        """The leaf (node index, heap order) each row reaches by hard routing."""
        phi = self._phi()
        return self._tree().hard_leaf(phi.design(self._validated(X)))

    def _raw(self, X) -> np.ndarray:
        phi = self._phi()
        Z = phi.design(self._validated(X))
        return np.einsum("ij,ij->i", Z, self.coef_[self._tree().hard_leaf(Z)])

    @property
    def leaves_(self) -> list[int]:
        tree = self._tree()
        return tree.leaves

    def path_columns(self, leaf: int) -> np.ndarray:
        """The phi columns (raw features, or trees of ``phi_booster_``) read by the nodes on the path to
        ``leaf``."""
        if leaf not in self.leaves_:
            raise CEGBError(f"leaf should be one of the tree's leaves {self.leaves_}, got {leaf!r}")
        return np.flatnonzero((self.coef_[node_path(int(leaf)), 1:] != 0).any(axis=0))

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """Exact cost per row: each feature (and group) read on the row's path once; with the boosting trick,
        the features each used tree tests on the row's way through it and the trees' evaluation, as
        LightGBM evaluates them (the package's per-row cost state)."""
        X = self._validated(X)
        phi = self._phi()
        leaf = self._tree().hard_leaf(phi.design(X))
        state = CostState(X.shape[0], self.costs_, self.n_features_in_)
        for l in np.unique(leaf):
            rows = np.flatnonzero(leaf == l)
            for column in self.path_columns(int(l)):
                if phi.forest is None:
                    state.pay(int(column), rows)
                else:
                    state.add(phi.forest, X[rows], trees=(int(column), int(column) + 1), rows=rows, n_jobs=n_jobs)
        return state.report(self.costs_)

    # ------------------------------------------------------------------------------------- files

    def save(self, path: str | os.PathLike) -> None:
        """``path`` (a directory): manifest.json (format ``lightgbm_cegb.<class>`` version 1: parameters,
        weights ``coef`` per node with the intercept first, ``threshold``, ``alive``, the cost model) and, with
        the boosting trick, phi.txt (the LightGBM model whose trees are phi)."""
        check_is_fitted(self, "coef_")
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        if self.phi_booster_ is not None:
            text = self.phi_booster_.model_to_string()
            write_atomically(folder / "phi.txt", lambda tmp: Path(tmp).write_text(text))
        manifest = {"format": f"lightgbm_cegb.{type(self).__name__}", "version": 1,
                    "params": {k: self.get_params()[k] for k in ("depth", "lam", "rho", "n_iter", "tol", "polish",
                                                                 "random_state")},
                    "n_features_in": int(self.n_features_in_), "phi": self.phi_booster_ is not None,
                    "coef": self.coef_.tolist(), "threshold": self.threshold_.tolist(),
                    "alive": self.alive_.tolist(), "costs": self.costs_.to_dict(self.n_features_in_),
                    **self._manifest_fields()}
        write_atomically(folder / "manifest.json", lambda tmp: Path(tmp).write_text(json.dumps(manifest)))

    @classmethod
    def load(cls, path: str | os.PathLike):
        folder = Path(path)
        try:
            manifest = json.loads((folder / "manifest.json").read_text())
        except (OSError, ValueError) as error:
            raise CEGBError(f"{folder}: no readable manifest.json ({error})") from None
        if manifest.get("format") != f"lightgbm_cegb.{cls.__name__}" or manifest.get("version") != 1:
            raise CEGBError(f"{folder}: not a {cls.__name__} model (manifest format {manifest.get('format')!r}, "
                            f"version {manifest.get('version')!r})")
        booster = lgb.Booster(model_file=str(folder / "phi.txt")) if manifest["phi"] else None
        costs = FeatureCosts.from_dict(manifest["costs"])
        model = cls(**manifest["params"], costs=costs, phi=booster)
        model.n_features_in_ = manifest["n_features_in"]
        model.costs_ = costs
        model.phi_booster_ = booster
        model._phi_ = _Phi(costs, model.n_features_in_, None if booster is None else to_forest(booster))
        model.coef_ = np.asarray(manifest["coef"], dtype=np.float64)
        model.threshold_ = np.asarray(manifest["threshold"], dtype=np.float64)
        model.alive_ = np.asarray(manifest["alive"], dtype=bool)
        model._load_fields(manifest)
        return model

    def _manifest_fields(self) -> dict:
        return {}

    def _load_fields(self, manifest: dict) -> None:
        pass


def _weights(weight, n: int, name: str) -> np.ndarray:
    weight = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
    if weight.shape != (n,) or not np.isfinite(weight).all() or (weight < 0).any() or not weight.any():
        raise CEGBError(f"{name} should hold {n} finite weights >= 0, not all zero")
    return weight


class CSTC(RegressorMixin, _CSTCBase):
    """CSTC for regression (squared loss), also ranking by regression on relevance labels.

    Parameters
    ----------
    depth : int, default 3
        Levels of the balanced tree (2 ** depth - 1 nodes, 2 ** (depth - 1) leaves), before pruning.
    lam : float, default 0.01
        Weight of the expected feature cost against the mean squared error (the labels' scale matters).
    rho : float, default 0
        Weight of every node's l1 penalty.
    costs : FeatureCosts or lazy costs per column, optional (default: every feature costs 1)
        Lazy costs and groups are paid per row; coupled costs are reported, not optimised.
    phi : None, LightGBM Booster or model, or int
        None: the nodes read the raw features (which should be on comparable scales: weights below 1e-4 are
        clamped to zero). A LightGBM model: the nodes read its trees' outputs (the boosting trick; a used tree's
        features and evaluation are paid). An int: a LightGBM model of that many trees is trained first.
    n_iter : int, default 10
        Sweeps of block coordinate descent at most; ``tol``: stop when a sweep lowers eq. 12 by less (relative).
    polish : bool, default True
        The local search on the unrelaxed objective after fine-tuning (module docstring).
    random_state : int, optional
        Seed of the LightGBM model trained for ``phi=int`` (the rest is deterministic).

    ``fit(X, y, sample_weight=None, eval_set=None)``: with ``eval_set = (X_valid, y_valid[, weights])`` the
    initialised tree is pruned bottom-up on it.
    """

    _phi_objective = "regression"

    def fit(self, X, y, *, sample_weight=None, eval_set=None) -> CSTC:
        X, y = validate_data(self, X, y, y_numeric=True, reset=True, ensure_min_samples=2, **self._reading())
        return self._fit(X, y, sample_weight, eval_set)

    def _target(self, y: np.ndarray, name: str) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64).ravel()
        if not np.isfinite(y).all():
            raise CEGBError(f"{name} should be finite numbers")
        return y

    def predict(self, X) -> np.ndarray:
        return self._raw(X)


class CSTCClassifier(ClassifierMixin, _CSTCBase):
    """CSTC for binary classification: the squared loss on labels coded -1 / +1 (as the paper's regression
    nodes); ``decision_function`` is the leaf's prediction, positive for ``classes_[1]``. Parameters as
    :class:`CSTC` (``phi=int`` trains a binary LightGBM model)."""

    _phi_objective = "binary"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, *, sample_weight=None, eval_set=None) -> CSTCClassifier:
        X, y = validate_data(self, X, y, reset=True, ensure_min_samples=2, **self._reading())
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind != "binary":
            raise CEGBError(f"Only binary classification is supported. The type of the target is {kind} "
                            f"({len(np.unique(y))} classes); CSCC takes two classes, CSTC regresses")
        self.classes_ = np.unique(y)
        if len(self.classes_) != 2:
            raise CEGBError(f"y: CSTCClassifier needs 2 classes, got 1 class ({self.classes_[0]!r})")
        return self._fit(X, self._target(y, "y"), sample_weight, eval_set)

    def _target(self, y: np.ndarray, name: str) -> np.ndarray:
        y = np.asarray(y).ravel()
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise CEGBError(f"{name}: labels {np.unique(y[unknown])[:10].tolist()} are not among the training "
                            f"classes {self.classes_.tolist()}")
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def decision_function(self, X) -> np.ndarray:
        return self._raw(X)

    def predict(self, X) -> np.ndarray:
        positive = self._raw(X) > 0
        return self.classes_[positive.astype(np.int64)]

    def _manifest_fields(self) -> dict:
        return {"classes": self.classes_.tolist()}

    def _load_fields(self, manifest: dict) -> None:
        self.classes_ = np.asarray(manifest["classes"])
