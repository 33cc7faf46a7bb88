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

    def reach(self, beta: np.ndarray, theta: np.ndarray, Z: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(p_ik, sigma_ik): the probability of reaching each node, of going up at each internal node."""
        Z = self.Z if Z is None else Z
        P = np.zeros((Z.shape[0], self.num_nodes))
        S = np.zeros_like(P)
        P[:, 0] = 1.0
        for k in self.nodes:
            if not self.is_leaf(k):
                S[:, k] = expit(Z @ beta[k] - theta[k])
                P[:, 2 * k + 1] = P[:, k] * (1 - S[:, k])
                P[:, 2 * k + 2] = P[:, k] * S[:, k]
        return P, S

    def hard_leaf(self, Z: np.ndarray, beta: np.ndarray | None = None, theta: np.ndarray | None = None) -> np.ndarray:
        beta = self.beta if beta is None else beta
        theta = self.theta if theta is None else theta
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
        live = ~self.frozen[k]
        A0 = self.Z[:, live].T @ (self.Z[:, live] * omega[:, None])
        b = self.Z[:, live].T @ (omega * self.y)
        for r in range(rounds):
            if r == 0 and start is not None:
                gamma = np.full(self.d - 1, start)
                eta = np.full(len(self.units.cost), start)
            else:
                w = self.beta[:, 1:]
                gamma = np.maximum(np.abs(w[k]), CLAMP)
                eta = np.maximum(np.sqrt(self.units.norms2((w[path] ** 2).sum(axis=0))), CLAMP)
            ridge = np.zeros(self.d)
            ridge[1:] = self.rho / gamma + self.lam * p_k * (self.units.M.T @ (self.units.cost / eta))
            A = A0 + self.n / 2 * np.diag(ridge[live]) + 1e-10 * np.trace(A0) / self.d * np.eye(int(live.sum()))
            self.beta[k] = 0.0
            self.beta[k, live] = np.linalg.solve(A, b)
        self._clamp(k)

    def initialise(self) -> None:
        """Top-down: each node fitted as a leaf given its ancestors (bounds starting at 1), an internal node's
        threshold in the widest gap of its scores between their 20% and 80% weighted quantiles."""
        for k in self.nodes:
            self.fit_as_leaf(k, 10, start=1.0)
            if not self.is_leaf(k):
                weight = self.s * self.reach(self.beta, self.theta)[0][:, k]
                score = self.Z @ self.beta[k]
                order = np.argsort(score, kind="stable")
                mass = np.cumsum(weight[order]) / max(weight.sum(), 1e-300)
                inside = np.flatnonzero((mass[:-1] >= 0.2) & (mass[:-1] <= 0.8))  # cuts after row j
                if inside.size == 0:
                    inside = np.array([min(int(np.searchsorted(mass, 0.5)), self.n - 2)])
                gap = score[order][inside + 1] - score[order][inside]
                at = int(inside[np.argmax(gap)])
                self.theta[k] = float(score[order][at] + score[order][at + 1]) / 2

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

    def fine_tune(self, leaves: list[int] | None = None) -> None:
        """Section 3.5: each leaf's squared loss (and l1 penalty) re-minimised on the columns it already uses,
        without the cost term, over the rows hard routing sends it (ours: the paper weighs rows by p_ik, and the
        few rows of other regions that a sigmoid still leaks can pull a leaf's weights far off)."""
        leaf_of = self.hard_leaf(self.Z)
        for k in self.leaves if leaves is None else leaves:
            live = ~self.frozen[k]
            omega = self.s * (leaf_of == k)
            if not omega.any():
                continue
            A0 = self.Z[:, live].T @ (self.Z[:, live] * omega[:, None])
            b = self.Z[:, live].T @ (omega * self.y)
            for _ in range(10 if self.rho > 0 else 1):
                ridge = np.zeros(self.d)
                ridge[1:] = self.rho / np.maximum(np.abs(self.beta[k, 1:]), CLAMP)
                A = A0 + self.n / 2 * np.diag(ridge[live]) + 1e-10 * np.trace(A0) / self.d * np.eye(int(live.sum()))
                self.beta[k, live] = np.linalg.solve(A, b)

    def exact_objective(self, beta: np.ndarray, theta: np.ndarray) -> float:
        """Eq. 3 on the training rows under hard routing: the weighted squared error plus lam times the mean
        exact cost of the units each row's path reads."""
        leaf = self.hard_leaf(self.Z, beta, theta)
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
        best = self.exact_objective(self.beta, self.theta)
        saved = self.beta.copy(), self.frozen.copy()
        self.select_leaves(self.leaves)
        value = self.exact_objective(self.beta, self.theta)
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
                        value = self.exact_objective(self.beta, self.theta)
                        if value < best - 1e-9 * max(1.0, abs(best)):
                            best, improved = value, True
                        else:
                            self.beta, self.frozen = saved
            if not improved:
                return
