"""CSTC, the cost-sensitive tree of classifiers, and its cascades CSCC and Cronus (Xu, Kusner, Weinberger, Chen
and Chapelle, JMLR 2014; Chen et al., AISTATS 2012; SEEDS.md section 5).

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
from .errors import CEGBError, check_number, checked_weights
from .models import booster_of, to_forest

__all__ = ["CSCC", "CSTC", "CSTCClassifier", "Cronus"]

CLAMP = 1e-4  # the paper's: a bound below this clamps its weight to zero


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


class Structure:
    """The shape of a model: slots 0..S-1, each after its parent. A slot is a classifier node (its own weights
    and threshold; with children ``kids[j] = (down, up)``: a row goes up when ``z.beta_j > theta_j``) or a
    cascade's exit (``param_of[j]``: the parent whose weights predict there). ``own_loss[j]``: the slot's reach
    weighs the squared loss of its prediction (CSTC: every node; a cascade: its exits and its last node)."""

    def __init__(self, kids: np.ndarray, param_of: np.ndarray, own_loss: np.ndarray) -> None:
        self.kids = np.asarray(kids, dtype=np.int64).reshape(-1, 2)
        self.param_of = np.asarray(param_of, dtype=np.int64)
        self.own_loss = np.asarray(own_loss, dtype=bool)
        self.parent = np.full(len(self.param_of), -1)
        for j, (down, up) in enumerate(self.kids):
            if down >= 0:
                self.parent[[down, up]] = j
        self.refresh()

    @classmethod
    def tree(cls, depth: int) -> Structure:
        """CSTC: a balanced tree of ``depth`` levels in heap order."""
        size = 2 ** depth - 1
        inner = np.arange(size) < 2 ** (depth - 1) - 1
        kids = np.where(inner[:, None], np.column_stack([2 * np.arange(size) + 1, 2 * np.arange(size) + 2]), -1)
        return cls(kids, np.arange(size), np.ones(size, dtype=bool))

    @classmethod
    def cascade(cls, stages: int) -> Structure:
        """CSCC and Cronus: classifier nodes 0, 2, 4, ... each with an exit (1, 3, ...) below and the next
        node above; the last node predicts for every row that reaches it."""
        size = 2 * stages - 1
        kids = np.full((size, 2), -1)
        param_of = np.arange(size)
        for k in range(0, size - 1, 2):
            kids[k] = (k + 1, k + 2)
            param_of[k + 1] = k
        own_loss = param_of != np.arange(size)
        own_loss[size - 1] = True
        return cls(kids, param_of, own_loss)

    def refresh(self) -> None:
        """Recompute the reachable slots (after ``make_leaf``)."""
        reached, todo = [], [0]
        while todo:
            j = todo.pop()
            reached.append(j)
            if self.kids[j, 0] >= 0:
                todo += list(self.kids[j])
        self.slots = sorted(reached)
        self.classifiers = [j for j in self.slots if self.param_of[j] == j]
        self.terminals = [j for j in self.slots if self.kids[j, 0] < 0]
        self.leaves = [j for j in self.classifiers if self.kids[j, 0] < 0]
        self.loss_slots = [j for j in self.slots if self.own_loss[j]]

    def has_kids(self, j: int) -> bool:
        return bool(self.kids[j, 0] >= 0)

    def path(self, j: int) -> list[int]:
        """The classifier nodes whose weights a row reaching slot j has read (root first)."""
        out = []
        while j >= 0:
            if self.param_of[j] not in out:
                out.append(int(self.param_of[j]))
            j = int(self.parent[j])
        return out[::-1]

    def subtree(self, j: int) -> list[int]:
        out, todo = [], [j]
        while todo:
            x = todo.pop()
            out.append(x)
            if self.has_kids(x):
                todo += list(self.kids[x])
        return sorted(out)

    def make_leaf(self, j: int) -> None:
        self.kids[j] = -1
        self.own_loss[j] = True
        self.refresh()

    def copy(self) -> Structure:
        return Structure(self.kids.copy(), self.param_of.copy(), self.own_loss.copy())


class Problem:
    """The training problem: ``Z`` (rows, 1 + columns; column 0 the intercept), targets, sample weights ``s``
    (mean 1), cost units, the structure, ``lam``, ``rho``; weights ``beta`` (slots, 1 + columns) and thresholds
    ``theta``. The cost term: per terminal, its reach times the mixed norm of the weights on its path (CSTC,
    CSCC); ``cronus``: one mixed norm over every node's weights scaled by the node's reach."""

    def __init__(self, Z: np.ndarray, y: np.ndarray, s: np.ndarray, units: Units, structure: Structure, lam: float,
                 rho: float, cronus: bool = False) -> None:
        self.Z, self.y, self.s = Z, y, s
        self.n, self.d = Z.shape
        self.units, self.lam, self.rho, self.cronus = units, lam, rho, cronus
        self.shape = structure
        size = len(structure.param_of)
        self.beta = np.zeros((size, self.d))
        self.theta = np.zeros(size)
        self.frozen = np.zeros((size, self.d), dtype=bool)  # weights clamped to zero for good

    def is_leaf(self, k: int) -> bool:
        return not self.shape.has_kids(k)

    def reach(self, beta: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p_ij, sigma_ij): the probability of reaching each slot, of going up at each slot with children."""
        P = np.zeros((self.n, len(beta)))
        S = np.zeros_like(P)
        P[:, 0] = 1.0
        for j in self.shape.slots:
            if self.shape.has_kids(j):
                down, up = self.shape.kids[j]
                S[:, j] = expit(self.Z @ beta[j] - theta[j])
                P[:, down] = P[:, j] * (1 - S[:, j])
                P[:, up] = P[:, j] * S[:, j]
        return P, S

    def hard_terminal(self, Z: np.ndarray) -> np.ndarray:
        """The terminal slot each row of ``Z`` reaches by hard routing (up when ``z.beta_j > theta_j``)."""
        slot = np.zeros(Z.shape[0], dtype=np.int64)
        while True:
            inner = np.flatnonzero(self.shape.kids[slot, 0] >= 0)
            if inner.size == 0:
                return slot
            j = slot[inner]
            score = np.einsum("ij,ij->i", Z[inner], self.beta[j])
            slot[inner] = self.shape.kids[j, (score > self.theta[j]).astype(np.int64)]

    def predictions(self, Z: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", Z, self.beta[self.shape.param_of[slot]])

    # ----------------------------------------------------------------------------------- objective

    def _entries(self, beta: np.ndarray, p_bar: np.ndarray) -> list[tuple[int, float, list, np.ndarray]]:
        """The cost term's mixed norms: (terminal slot or -1, weight, [(node, scale)], unit norms^2)."""
        sq = beta[:, 1:] ** 2
        if self.cronus:
            rows = [(k, float(p_bar[k])) for k in self.shape.classifiers]
            return [(-1, 1.0, rows, self.units.norms2(sum(scale ** 2 * sq[k] for k, scale in rows)))]
        return [(t, float(p_bar[t]), [(k, 1.0) for k in self.shape.path(t)],
                 self.units.norms2(sq[self.shape.path(t)].sum(axis=0))) for t in self.shape.terminals]

    def objective(self, beta: np.ndarray | None = None, theta: np.ndarray | None = None, bounds=None) -> float:
        """The relaxed objective (CSTC eq. 12, CSCC eq. 19, Cronus); with ``bounds`` = (gamma per slot and
        column, eta per cost entry and unit) its variational upper bound."""
        return self._evaluate(beta, theta, bounds, gradient=False)[0]

    def gradient(self, beta: np.ndarray | None = None, theta: np.ndarray | None = None, bounds=None):
        """(objective, d/d beta, d/d theta) of the bounded objective (``bounds`` required)."""
        return self._evaluate(beta, theta, bounds, gradient=True)

    def _evaluate(self, beta, theta, bounds, gradient: bool):
        beta = self.beta if beta is None else beta
        theta = self.theta if theta is None else theta
        shape, nodes = self.shape, self.shape.classifiers
        P, S = self.reach(beta, theta)
        R = np.zeros((self.n, len(beta)))
        R[:, nodes] = self.Z @ beta[nodes].T - self.y[:, None]
        V = np.zeros_like(P)  # per row, the slot's share of the objective (times p_ij)
        for j in shape.loss_slots:
            V[:, j] = self.s * R[:, shape.param_of[j]] ** 2 / self.n
        w = beta[:, 1:]
        if bounds is None:
            total = self.rho * float(np.abs(w[nodes]).sum())
        else:
            gamma, eta = bounds
            total = self.rho * float(np.sum((w[nodes] ** 2 / gamma[nodes] + gamma[nodes]) / 2))
        p_bar = (self.s[:, None] * P).mean(axis=0)
        entries = self._entries(beta, p_bar)
        for e, (t, weight, _, g) in enumerate(entries):
            cost = float(self.units.cost @ (np.sqrt(g) if bounds is None else (g / eta[e] + eta[e]) / 2))
            if t >= 0:
                V[:, t] += self.lam * self.s * cost / self.n
            else:
                total += self.lam * cost
        total += float(np.sum(P * V))
        if not gradient:
            return total, None, None
        gamma, eta = bounds
        g_beta = np.zeros_like(beta)
        g_theta = np.zeros_like(theta)
        for j in shape.loss_slots:
            k = shape.param_of[j]
            g_beta[k] += 2 / self.n * ((self.s * P[:, j] * R[:, k]) @ self.Z)
        g_beta[nodes, 1:] += self.rho * w[nodes] / gamma[nodes]
        for e, (t, weight, rows, _) in enumerate(entries):
            per_column = self.units.M.T @ (self.units.cost / eta[e])  # d cost / d (w_ka^2 / 2), scale 1
            for k, scale in rows:
                g_beta[k, 1:] += self.lam * weight * scale ** 2 * per_column * w[k]
                if t < 0:  # Cronus: the scale is node k's reach, a function of the routing
                    d_scale = self.lam * scale * float(self.units.cost @ (self.units.norms2(w[k] ** 2) / eta[e]))
                    V[:, k] += d_scale * self.s / self.n
        U = P * V  # subtree sums, bottom-up
        for j in reversed(shape.slots):
            if shape.has_kids(j):
                down, up = shape.kids[j]
                ds = (1 - S[:, j]) * U[:, up] - S[:, j] * U[:, down]
                U[:, j] += U[:, up] + U[:, down]
                g_beta[j] += ds @ self.Z
                g_theta[j] = -ds.sum()
        return total, g_beta, g_theta

    def tight_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The bounds at which the variational bound equals the objective at the current weights (floored at
        CLAMP)."""
        gamma = np.maximum(np.abs(self.beta[:, 1:]), CLAMP)
        p_bar = (self.s[:, None] * self.reach(self.beta, self.theta)[0]).mean(axis=0)
        eta = np.array([np.maximum(np.sqrt(g), CLAMP) for *_, g in self._entries(self.beta, p_bar)])
        return gamma, eta

    def _clamp(self, k: int) -> None:
        """Node k's weights whose bound sits at the floor (|beta| < CLAMP) are zero for good."""
        self.frozen[k, 1:] |= np.abs(self.beta[k, 1:]) < CLAMP
        self.beta[k, self.frozen[k]] = 0.0

    # ----------------------------------------------------------------------------------- steps

    def fit_as_leaf(self, k: int, rounds: int, *, start: float | None = None) -> None:
        """Eq. 16 for node k as the last node of the path to it (what follows it cut off), alternated with its
        bounds: ``beta = (Z' Omega Z + n/2 diag(rho / gamma + lam p_k Q))^-1 Z' Omega y``, Omega = diag(s_i p_ik),
        Q the column's share of the path's bounded unit costs (Cronus: each node's weights scaled by its reach,
        ``p_k Q`` becoming ``p_k^2 Q``). ``start``: the bounds' first value (None: from the current weights)."""
        path = self.shape.path(k)
        P = self.reach(self.beta, self.theta)[0]
        omega = self.s * P[:, k]
        p_k = omega.mean()
        scale = (self.s[:, None] * P[:, path]).mean(axis=0) if self.cronus else np.ones(len(path))
        weight = p_k ** 2 if self.cronus else p_k

        def ridge(r: int) -> np.ndarray:
            if r == 0 and start is not None:
                gamma = np.full(self.d - 1, start)
                eta = np.full(len(self.units.cost), start)
            else:
                w = self.beta[:, 1:]
                gamma = np.maximum(np.abs(w[k]), CLAMP)
                eta = np.maximum(np.sqrt(self.units.norms2(((scale[:, None] * w[path]) ** 2).sum(axis=0))), CLAMP)
            return self.rho / gamma + self.lam * weight * (self.units.M.T @ (self.units.cost / eta))

        self._weighted_ridge(k, omega, rounds, ridge)
        self._clamp(k)

    def _weighted_ridge(self, k: int, omega: np.ndarray, rounds: int, ridge) -> None:
        """Node k's live weights: ``rounds`` times ``(Z' Omega Z + n/2 diag(0, ridge(r)))^-1 Z' Omega y``, ``ridge(r)``
        (per column) read from the weights of the round before. A node no row reaches (Omega = 0, the sigmoid
        saturated) keeps its weights."""
        if not omega.sum() > 0:
            return
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
        for k in self.shape.classifiers:
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
        few rows of other regions that a sigmoid still leaks can pull a leaf's weights far off). A cascade's exits
        predict with their node's weights, which also route: they are not re-fitted."""
        leaf_of = self.hard_terminal(self.Z)
        for k in self.shape.leaves:
            omega = self.s * (leaf_of == k)
            if omega.any():
                self._weighted_ridge(k, omega, 10 if self.rho > 0 else 1,
                                     lambda r, k=k: self.rho / np.maximum(np.abs(self.beta[k, 1:]), CLAMP))

    def exact_objective(self) -> float:
        """Eq. 3 on the training rows under hard routing: the weighted squared error plus lam times the mean l0
        cost of the units each row's path reads (with the boosting trick: every feature of a used tree)."""
        slot = self.hard_terminal(self.Z)
        total = float(np.mean(self.s * (self.predictions(self.Z, slot) - self.y) ** 2))
        for t in np.unique(slot):
            used = (self.beta[self.shape.path(int(t)), 1:] != 0).any(axis=0)
            total += self.lam * float(self.s[slot == t].sum()) / self.n * self.units.path_cost(used)
        return total

    def select_leaf(self, k: int, rows: np.ndarray) -> None:
        """Leaf k's columns chosen for ``exact_objective`` over ``rows`` (those hard routing sends it): every
        column its ancestors' units already pay for, then forward selection, each step the column of the best
        true gain (squared error saved minus lam times the share of rows times the units it newly pays) among the
        five that a matching-pursuit score ranks first, while that gain is positive. Least squares from the
        rows' weighted Gram matrix, formed once. A leaf no row reaches keeps its weights."""
        if rows.size == 0 or not self.s[rows].sum() > 0:
            return
        self.beta[k] = 0.0
        self.frozen[k] = True
        self.frozen[k, 0] = False
        used = (self.beta[self.shape.path(k)[:-1], 1:] != 0).any(axis=0)
        paid = (self.units.member & used).any(axis=1)
        share = float(self.s[rows].sum()) / self.n
        Zr, w, yr = self.Z[rows], self.s[rows], self.y[rows]
        G = Zr.T @ (Zr * w[:, None])
        g = Zr.T @ (w * yr)
        yy = float(w @ yr ** 2)

        def least_squares(columns: list[int]) -> tuple[np.ndarray, np.ndarray, float]:
            """(Z columns, weights, weighted squared error / n) over the intercept and phi ``columns``."""
            index = np.append(0, np.array(columns, dtype=np.int64) + 1)
            A = G[np.ix_(index, index)]
            coef = np.linalg.solve(A + 1e-12 * max(np.trace(A) / len(index), 1e-300) * np.eye(len(index)), g[index])
            return index, coef, max(yy - 2 * coef @ g[index] + coef @ A @ coef, 0.0) / self.n

        def prices() -> np.ndarray:
            return (self.units.cost[:, None] * (self.units.member & ~paid[:, None])).sum(axis=0)

        columns = [int(a) for a in np.flatnonzero(prices() == 0)]
        index, coef, err = least_squares(columns)
        norm2 = np.diag(G)[1:]
        while True:
            price = prices()
            score = (g[1:] - G[1:, index] @ coef) ** 2 / np.maximum(norm2, 1e-300) / self.n - self.lam * share * price
            score[columns] = -np.inf
            best = None
            for a in np.argsort(-score)[:5]:
                if not np.isfinite(score[a]):
                    break
                trial = least_squares(columns + [int(a)])
                gain = err - trial[2] - self.lam * share * price[a]
                if gain > 1e-12 * max(err, 1e-300) and (best is None or gain > best[0]):
                    best = (gain, int(a), trial)
            if best is None:
                break
            _, a, (index, coef, err) = best
            columns.append(a)
            paid |= self.units.member[:, a]
        self.beta[k, index] = coef
        self.frozen[k, index] = False

    def select_leaves(self, leaves: list[int]) -> None:
        leaf_of = self.hard_terminal(self.Z)
        for k in leaves:
            self.select_leaf(k, np.flatnonzero(leaf_of == k))

    def polish(self, passes: int = 3) -> None:
        """Local search for ``exact_objective``: the leaves' columns re-selected (``select_leaf``); then, in level
        order, for each internal node k and column a it reads, drop a from k alone or from k and its internal
        descendants (each intercept moved by the dropped term's mean over the node's soft reach), the leaves
        below re-selected; keep what lowers the objective."""
        best = self.exact_objective()
        saved = self.beta.copy(), self.frozen.copy()
        self.select_leaves(self.shape.leaves)
        value = self.exact_objective()
        if value < best:
            best = value
        else:
            self.beta, self.frozen = saved
        for _ in range(passes):
            improved = False
            for k in [k for k in self.shape.classifiers if not self.is_leaf(k)]:
                subtree = [j for j in self.shape.subtree(k) if j in self.shape.classifiers]
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

    def error(self, Z: np.ndarray, y: np.ndarray, s: np.ndarray) -> float:
        """The weighted squared error of rows ``Z`` under hard routing."""
        return float(np.sum(s * (self.predictions(Z, self.hard_terminal(Z)) - y) ** 2))

    def prune(self, Z_valid: np.ndarray, y_valid: np.ndarray, s_valid: np.ndarray) -> None:
        """Section 3.6.1, bottom-up: a node whose children are both terminal becomes a leaf (its initial weights,
        fitted as the last node of its path) when that does not raise the validation squared error under hard
        routing (a cascade loses its last stage)."""

        changed = True
        while changed:
            changed = False
            for k in reversed(self.shape.classifiers):
                if self.is_leaf(k) or any(self.shape.has_kids(j) for j in self.shape.kids[k]):
                    continue
                before, saved = self.error(Z_valid, y_valid, s_valid), self.shape.copy()
                self.shape.make_leaf(k)
                if self.error(Z_valid, y_valid, s_valid) <= before:
                    changed = True
                else:
                    self.shape = saved



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


class _Base(BaseEstimator):
    """What the estimators share: parameters, fit, routing, cost, files. A subclass gives ``_structure()``,
    ``_target`` (the labels as regression targets) and ``_phi_objective``."""

    _cronus = False

    def _set(self, lam, rho, costs, phi, n_iter, tol, polish, random_state) -> None:
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

    def _class_weights(self, target: np.ndarray) -> tuple[float, float]:
        """Row weights of targets <= 0 and > 0 (the estimator's class weights; 1 and 1 here)."""
        return 1.0, 1.0

    def _fit(self, X, target: np.ndarray, sample_weight, eval_set) -> _Base:
        self._check_params()
        structure = self._structure()
        names = [str(n) for n in getattr(self, "feature_names_in_", [])] or None
        d = X.shape[1]
        self.costs_ = resolve_costs(FeatureCosts(lazy=np.ones(d)) if self.costs is None else self.costs, d, names)
        negative, positive = self._class_weights(target)
        weight = checked_weights(sample_weight, len(target)) * np.where(target > 0, positive, negative)
        self.phi_booster_ = None
        phi = self._make_phi(X, target, weight)
        problem = Problem(phi.design(X), target, weight / weight.mean(), phi.units, structure, self.lam, self.rho,
                          cronus=self._cronus)
        problem.initialise()
        if eval_set is not None:
            if not (isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3)):
                raise CEGBError("eval_set should be (X_valid, y_valid) or (X_valid, y_valid, sample_weight_valid), "
                                f"got {type(eval_set).__name__}")
            X_valid = self._validated(eval_set[0])
            y_valid = self._target(np.asarray(eval_set[1]), "eval_set's labels")
            if len(y_valid) != X_valid.shape[0]:
                raise CEGBError(f"eval_set: {X_valid.shape[0]} rows but {len(y_valid)} labels")
            valid_weight = checked_weights(eval_set[2] if len(eval_set) == 3 else None, len(y_valid),
                                           "eval_set's weights")
            valid = (phi.design(X_valid), y_valid, valid_weight * np.where(y_valid > 0, positive, negative))
            problem.prune(*valid)
        previous = problem.objective()
        best = (problem.error(*valid), 0, problem.beta.copy(), problem.theta.copy(), problem.frozen.copy()) \
            if eval_set is not None else None
        self.n_iter_ = 0
        for sweep in range(1, self.n_iter + 1):
            for k in problem.shape.classifiers:
                problem.update(k)
            self.n_iter_ = sweep
            if best is not None:
                error = problem.error(*valid)
                if error < best[0]:
                    best = (error, sweep, problem.beta.copy(), problem.theta.copy(), problem.frozen.copy())
            value = problem.objective()
            if previous - value <= self.tol * max(abs(previous), 1e-300):
                break
            previous = value
        self.best_iteration_ = self.n_iter_
        if best is not None:  # the sweep of the best validation error (the paper's early stopping)
            _, self.best_iteration_, problem.beta, problem.theta, problem.frozen = best
        self.objective_ = problem.objective()
        problem.fine_tune()
        if self.polish:
            problem.polish()
        self.coef_, self.threshold_, self.structure_ = problem.beta.copy(), problem.theta.copy(), problem.shape
        self._phi_ = phi
        return self

    # ---------------------------------------------------------------------------------- prediction

    def _fitted(self) -> tuple[_Phi, Problem]:
        """phi and a Problem holding the fitted model (for routing)."""
        check_is_fitted(self, "coef_")
        model = Problem(np.zeros((0, self.coef_.shape[1])), np.zeros(0), np.zeros(0), self._phi_.units,
                        self.structure_, 0.0, 0.0)
        model.beta, model.theta = self.coef_, self.threshold_
        return self._phi_, model

    def apply(self, X) -> np.ndarray:
        """The terminal slot each row reaches by hard routing (a leaf, or a cascade's exit)."""
        phi, model = self._fitted()
        return model.hard_terminal(phi.design(self._validated(X)))

    def _raw(self, X) -> np.ndarray:
        phi, model = self._fitted()
        Z = phi.design(self._validated(X))
        return model.predictions(Z, model.hard_terminal(Z))

    @property
    def terminals_(self) -> list[int]:
        """The terminal slots (``apply``'s values)."""
        check_is_fitted(self, "coef_")
        return [int(t) for t in self.structure_.terminals]

    def path_columns(self, terminal: int) -> np.ndarray:
        """The phi columns (raw features, or trees of ``phi_booster_``) read by the nodes on the way to the
        terminal slot ``terminal``."""
        if terminal not in self.terminals_:
            raise CEGBError(f"terminal should be one of {self.terminals_}, got {terminal!r}")
        return np.flatnonzero((self.coef_[self.structure_.path(int(terminal)), 1:] != 0).any(axis=0))

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:
        """Exact cost per row: each feature (and group) read on the row's path once; with the boosting trick,
        the features each used tree tests on the row's way through it and the trees' evaluation, as
        LightGBM evaluates them (the package's per-row cost state)."""
        X = self._validated(X)
        phi, model = self._fitted()
        slot = model.hard_terminal(phi.design(X))
        state = CostState(X.shape[0], self.costs_, self.n_features_in_)
        for t in np.unique(slot):
            rows = np.flatnonzero(slot == t)
            columns = self.path_columns(int(t))
            if phi.forest is None:
                for column in columns:
                    state.pay(int(column), rows)
                continue
            X_rows = X[rows]
            starts = columns[np.r_[True, np.diff(columns) > 1]] if columns.size else columns
            stops = columns[np.r_[np.diff(columns) > 1, True]] + 1 if columns.size else columns
            for t0, t1 in zip(starts, stops):  # runs of consecutive trees, one pass each
                state.add(phi.forest, X_rows, trees=(int(t0), int(t1)), rows=rows, n_jobs=n_jobs)
        return state.report(self.costs_)

    # ------------------------------------------------------------------------------------- files

    def save(self, path: str | os.PathLike) -> None:
        """``path`` (a directory): manifest.json (format ``lightgbm_cegb.<class>`` version 1: the parameters, the
        structure as ``kids`` / ``param_of`` / ``own_loss`` per slot, weights ``coef`` per slot with the
        intercept first, ``threshold``, the cost model) and, with the boosting trick, phi.txt (the LightGBM
        model whose trees are phi)."""
        check_is_fitted(self, "coef_")
        params = {k: _plain(v) for k, v in self.get_params(deep=False).items() if k not in ("costs", "phi")}
        if isinstance(params.get("class_weight"), dict):
            params["class_weight"] = [[_plain(k), _plain(v)] for k, v in params["class_weight"].items()]
        params["phi"] = _plain(self.phi) if isinstance(self.phi, (int, np.integer)) else None
        shape = self.structure_
        manifest = {"format": f"lightgbm_cegb.{type(self).__name__}", "version": 1, "params": params,
                    "costs_given": self.costs is not None, "n_iter": self.n_iter_,
                    "best_iteration": self.best_iteration_, "objective": self.objective_,
                    "feature_names_in": None if not hasattr(self, "feature_names_in_") else
                    [str(n) for n in self.feature_names_in_],
                    "n_features_in": int(self.n_features_in_), "phi": self.phi_booster_ is not None,
                    "kids": shape.kids.tolist(), "param_of": shape.param_of.tolist(),
                    "own_loss": shape.own_loss.tolist(), "coef": self.coef_.tolist(),
                    "threshold": self.threshold_.tolist(), "costs": self.costs_.to_dict(self.n_features_in_),
                    "classes": None if not hasattr(self, "classes_") else [_plain(c) for c in self.classes_]}
        text = json.dumps(manifest)  # before any file is written: a value JSON cannot hold fails here
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        if self.phi_booster_ is not None:
            model_text = self.phi_booster_.model_to_string()
            write_atomically(folder / "phi.txt", lambda tmp: Path(tmp).write_text(model_text))
        write_atomically(folder / "manifest.json", lambda tmp: Path(tmp).write_text(text))

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
        params = dict(manifest["params"])
        if isinstance(params.get("class_weight"), list):
            params["class_weight"] = {k: v for k, v in params["class_weight"]}
        params["phi"] = booster if params["phi"] is None else params["phi"]  # phi=int keeps training new trees
        model = cls(**params, costs=costs if manifest["costs_given"] else None)
        model.n_features_in_ = manifest["n_features_in"]
        model.costs_ = costs
        model.phi_booster_ = booster
        model._phi_ = _Phi(costs, model.n_features_in_, None if booster is None else to_forest(booster))
        model.structure_ = Structure(manifest["kids"], manifest["param_of"], manifest["own_loss"])
        model.coef_ = np.asarray(manifest["coef"], dtype=np.float64)
        model.threshold_ = np.asarray(manifest["threshold"], dtype=np.float64)
        model.n_iter_, model.best_iteration_, model.objective_ = \
            manifest["n_iter"], manifest["best_iteration"], manifest["objective"]
        if manifest["feature_names_in"] is not None:
            model.feature_names_in_ = np.asarray(manifest["feature_names_in"], dtype=object)
        if manifest["classes"] is not None:
            model.classes_ = np.asarray(manifest["classes"])
        return model


def _plain(value):
    """A numpy scalar as the Python value JSON writes."""
    return value.item() if isinstance(value, np.generic) else value


_SHARED = """    lam : float, default 0.01
        Weight of the expected feature cost against the mean squared error (the labels' scale matters, and it
        also sets how sharply the soft routing splits: the same weights predict and route, so labels in the
        thousands saturate the sigmoids; scale them to units or tens).
    rho : float, default 0
        Weight of every node's l1 penalty.
    costs : FeatureCosts or lazy costs per column, optional (default: every feature costs 1)
        Lazy costs and groups are paid per row; coupled and split costs are reported, not optimised.
    phi : None, LightGBM Booster or model, or int
        None: the nodes read the raw features (which should be on comparable scales: weights below 1e-4 are
        clamped to zero). A LightGBM model: the nodes read its trees' outputs (the boosting trick; a used tree's
        features and evaluation are paid; scikit-learn's ``clone``, as in cross-validation, unfits an
        ``LGBMModel`` but keeps a ``Booster``: give ``model.booster_`` there). An int: a LightGBM model of that
        many trees is trained first.
    n_iter : int, default 10
        Sweeps of block coordinate descent at most; ``tol``: stop when a sweep lowers the objective by less
        (relative).
    polish : bool, default True
        The local search on the unrelaxed objective after fine-tuning (module docstring).
    random_state : int, optional
        Seed of the LightGBM model trained for ``phi=int`` (the rest is deterministic).

    ``fit(X, y, sample_weight=None, eval_set=None)``: with ``eval_set = (X_valid, y_valid[, weights])`` the
    initialised model is pruned bottom-up on it and the block coordinate descent keeps the sweep of the lowest
    validation error (``best_iteration_``, 0 for the initialisation; without ``eval_set`` the last), as the paper
    stops early."""


class _Tree(_Base):
    """The tree's parameter (``depth``)."""

    def __init__(self, *, depth: int = 3, lam: float = 0.01, rho: float = 0.0, costs=None, phi=None,
                 n_iter: int = 10, tol: float = 1e-6, polish: bool = True, random_state: int | None = None) -> None:
        self.depth = depth
        self._set(lam, rho, costs, phi, n_iter, tol, polish, random_state)

    def _structure(self) -> Structure:
        check_number(self.depth, "depth", 1, 16, integer=True)
        return Structure.tree(self.depth)


class CSTC(RegressorMixin, _Tree):
    __doc__ = f"""CSTC for regression (squared loss), also ranking by regression on relevance labels.

    Parameters
    ----------
    depth : int, default 3
        Levels of the balanced tree (2 ** depth - 1 nodes, 2 ** (depth - 1) leaves), before pruning.
{_SHARED}
    """

    _phi_objective = "regression"

    def fit(self, X, y, *, sample_weight=None, eval_set=None) -> CSTC:
        X, y = validate_data(self, X, y, y_numeric=True, reset=True, ensure_min_samples=2, **self._reading())
        return self._fit(X, self._target(y, "y"), sample_weight, eval_set)

    def _target(self, y: np.ndarray, name: str) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64).ravel()
        if not np.isfinite(y).all():
            raise CEGBError(f"{name} should be finite numbers")
        return y

    def predict(self, X) -> np.ndarray:
        return self._raw(X)


class _Binary:
    """Binary classification by the squared loss on labels coded -1 / +1 (the paper's nodes are regressors):
    ``decision_function`` is the terminal's prediction, positive for ``classes_[1]``."""

    _phi_objective = "binary"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, *, sample_weight=None, eval_set=None):
        X, y = validate_data(self, X, y, reset=True, ensure_min_samples=2, **self._reading())
        kind = type_of_target(y, input_name="y", raise_unknown=True)
        if kind != "binary":
            raise CEGBError(f"Only binary classification is supported. The type of the target is {kind} "
                            f"({len(np.unique(y))} classes)")
        self.classes_ = np.unique(y)
        if len(self.classes_) != 2:
            raise CEGBError(f"y: {type(self).__name__} needs 2 classes, got 1 class ({self.classes_[0]!r})")
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


class CSTCClassifier(_Binary, ClassifierMixin, _Tree):
    __doc__ = f"""CSTC for binary classification (squared loss on -1 / +1; ``phi=int`` trains a binary
    LightGBM model).

    Parameters
    ----------
    depth : int, default 3
        Levels of the balanced tree, before pruning.
{_SHARED}
    """


class CSCC(_Binary, ClassifierMixin, _Base):
    __doc__ = f"""CSCC, the cost-sensitive cascade of classifiers (Xu et al. 2014, section 4, eq. 19): a chain of
    linear nodes, node k exiting the rows with ``phi.beta_k <= theta_k`` (their prediction is node k's) and
    passing the others on; the last node predicts for every row that reaches it. Each node's squared loss is
    weighted by the probability of exiting there, the cost term sums over the exits, each weighted by its
    probability, of the mixed norm of the weights of the nodes before it; ``class_weight`` re-weights the
    classes for skewed data. Binary classification (squared loss on -1 / +1).

    Parameters
    ----------
    n_stages : int, default 5
        Classifier nodes in the chain, before pruning (pruning on ``eval_set`` drops the last stages that do not
        help).
    class_weight : None, "balanced" or {{label: weight}}
        Row weights per class (multiplying ``sample_weight``).
{_SHARED}
    """

    def __init__(self, *, n_stages: int = 5, class_weight=None, lam: float = 0.01, rho: float = 0.0, costs=None,
                 phi=None, n_iter: int = 10, tol: float = 1e-6, polish: bool = True,
                 random_state: int | None = None) -> None:
        self.n_stages = n_stages
        self.class_weight = class_weight
        self._set(lam, rho, costs, phi, n_iter, tol, polish, random_state)

    def _structure(self) -> Structure:
        check_number(self.n_stages, "n_stages", 1, 64, integer=True)
        return Structure.cascade(self.n_stages)

    def _class_weights(self, target: np.ndarray) -> tuple[float, float]:
        """(weight of classes_[0], of classes_[1]) from ``class_weight`` ("balanced": n / (2 n_class) on the
        training rows)."""
        if self.class_weight is None:
            return 1.0, 1.0
        if isinstance(self.class_weight, str) and self.class_weight == "balanced":
            share = float(np.mean(target > 0))
            return 0.5 / (1 - share), 0.5 / share
        if isinstance(self.class_weight, dict) and set(self.class_weight) == set(self.classes_.tolist()):
            weights = [self.class_weight[c] for c in self.classes_.tolist()]
            if all(isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0 and math.isfinite(w)
                   for w in weights):
                return float(weights[0]), float(weights[1])
        raise CEGBError(f"class_weight should be None, 'balanced' or {{label: weight > 0}} for the classes "
                        f"{self.classes_.tolist()}, got {self.class_weight!r}")


class Cronus(CSCC):
    __doc__ = f"""Cronus (Chen et al., AISTATS 2012), the cascade CSCC supersedes: CSCC's loss, but the cost term
    is one mixed norm over every node's weights, each node's scaled by the probability of reaching it
    (Xu et al. 2014, section 4.1).

    Parameters
    ----------
    n_stages, class_weight : as :class:`CSCC`
{_SHARED}
    """

    _cronus = True
