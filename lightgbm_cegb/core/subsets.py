"""The search for a feature subset that measures subsets: forward selection by measured gain (per unit of cost, or
not), lazy, within a budget, with backward pruning. What it measures is the caller's (a model of the subset scored
on held-out rows): the cheap-subset baseline (``selection``) and the staged acquisition's stage order use it.

A "unit" is what is bought at once: a feature group of the cost model or an ungrouped feature. A run starts from
the units that cost nothing; at each step it adds the unit whose addition gains the most measured quality per unit
of its cost (``by_ratio``) or the most quality: the better of the two runs is within a constant factor of the best
subset for submodular gains (Leskovec et al.'s CELF, KDD 2007). The search is lazy (Minoux's): every unit is
measured at the first step, later only those whose last measured score could still beat the others' (a unit's
gain rarely grows as the subset does; when it does, the unit is measured again before it is passed over). A run
stops when no unit gains (after the first unit, a step in any case), after ``steps`` steps, or when no unit fits
its budget; backward pruning then drops each unit of its subset, the costliest first, whose absence loses nothing,
and the run goes on forward from the pruned subset once.

Greedy additions miss a set of units that do better together than the first unit taken: three image quadrants where
the greedy search took the thumbnail first and two quadrants after it. The best answer of the runs is then improved
by exchanges (a local search): one unit of it out and one in within the budget, the exchange of the largest
measured gain taken, then forward again, for EXCHANGE_ROUNDS rounds. An exchange is measured lazily too, in the
order of a bound (the subset without the unit out, plus the unit in's gain alone: exact for additive gains, above
the truth for submodular ones), at most EXCHANGE_MEASURES per round.

The staged acquisition's stages must be nested (a row that goes on keeps what it bought): ``nested`` runs the
forward search within each of a ladder of rising prices in turn, each level from the subset of the one below, the
lazy bounds kept from level to level; the units in the order taken are the stages' order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

#: the rounds of exchanges from the runs' best answer, and the exchanges measured per round, at most
EXCHANGE_ROUNDS, EXCHANGE_MEASURES = 3, 12


@dataclass(frozen=True)
class Unit:
    """A group or an ungrouped feature: its name, its columns, its nominal cost per row."""

    name: str
    columns: tuple[int, ...]
    cost: float


def columns_of(taken: list[Unit]) -> list[int]:
    """The columns the units ``taken`` read, sorted."""
    return sorted(j for u in taken for j in u.columns)


def price_of(taken: list[Unit]) -> float:
    """The nominal cost per row of the units ``taken``."""
    return sum(u.cost for u in taken)


def subsample_index(y: np.ndarray, size: int, classes: bool) -> np.ndarray:
    """The sorted positions of about ``size`` of the rows of labels ``y`` (seeded, the same every call): each class
    in proportion with at least one row (``classes``), or uniformly."""
    rng = np.random.default_rng(0)
    if not classes:
        return np.sort(rng.choice(len(y), size, replace=False))
    return np.sort(np.concatenate([rng.choice(members, max(1, round(size * len(members) / len(y))), replace=False)
                                   for members in (np.flatnonzero(y == label) for label in np.unique(y))]))


#: the training (and the held-out) rows a search measures subsets on, at most (a subsample, classes in proportion)
SEARCH_ROWS = 5_000
#: the share of a staged model's training rows its search (``order="search"``) measures subsets on, training on the
#: others: the rows that stop its stages are a sweep's validation rows, which must not choose the order too (on
#: MNIST 3 vs 8, an order searched on them tied the importance order's best validation accuracy at a fifth of its
#: cost and lost 0.007 to 0.017 of test accuracy in 4 of 5 splits)
SEARCH_HELD_OUT = 0.25
#: the most priced units a search measures one by one: beyond it, the first step's fit per unit costs more than the
#: search is worth (MNIST's 1,120 pixels, Yahoo!'s 519 features); see :func:`searched`
MAX_UNITS = 256


def searched(cost: np.ndarray, gain: Callable[[], np.ndarray]) -> np.ndarray:
    """The positions of the units a search takes, given their prices and ``gain()``, each unit's gain importance in
    a model of every feature (asked for only when needed): all of them up to MAX_UNITS priced ones; else the free ones
    and, among the priced ones that gain, the MAX_UNITS / 2 of the largest gain and the MAX_UNITS / 2 of the largest
    gain per unit of cost (in their order)."""
    priced = np.flatnonzero(cost > 0)
    if len(priced) <= MAX_UNITS:
        return np.arange(len(cost))
    gain = np.asarray(gain(), dtype=np.float64)
    half = MAX_UNITS // 2
    by_gain = priced[np.argsort(-gain[priced], kind="stable")[:half]]
    by_ratio = priced[np.argsort(-gain[priced] / cost[priced], kind="stable")[:half]]
    kept = np.union1d(by_gain, by_ratio)
    return np.union1d(np.flatnonzero(cost == 0), kept[gain[kept] > 0])


def query_subsample(group: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole queries of about ``size`` rows (seeded, the same every call; queries of sizes ``group``, rows in query
    order), up to the first that reaches it: (the sorted positions of their rows, their sizes)."""
    starts = np.concatenate([[0], np.cumsum(group)[:-1]])
    order = np.random.default_rng(0).permutation(len(group))
    queries = np.sort(order[:int(np.searchsorted(np.cumsum(group[order]), size)) + 1])
    return np.concatenate([np.arange(starts[q], starts[q] + group[q]) for q in queries]), group[queries]


class SubsetSearch:
    """The forward search with backward pruning of the module's doc.

    Parameters
    ----------
    score : callable
        ``score(columns)`` for a sorted tuple of column indices: its quality, greater for better subsets. Called
        once per subset of columns (memoised).
    empty : float
        The quality of the empty subset (a run's first gain is measured from it).
    """

    def __init__(self, score: Callable[[tuple[int, ...]], float], empty: float) -> None:
        self.score = score
        self.empty = float(empty)
        self.measured: dict[Hashable, float] = {}
        self.subsets: dict[Hashable, list[Unit]] = {}  # the units of each measured subset

    def best(self, budget: float | None, count: int) -> list[list[Unit]]:
        """The ``count`` best subsets measured so far whose price is within ``budget`` (ties: the cheaper first)."""
        within = [(quality, -price_of(self.subsets[columns]), i, columns)
                  for i, (columns, quality) in enumerate(self.measured.items())
                  if columns and (budget is None or price_of(self.subsets[columns]) <= budget)]
        return [list(self.subsets[columns]) for *_, columns in sorted(within, key=lambda w: (-w[0], -w[1], w[2]))
                [:count]]

    def measure(self, taken: list[Unit]) -> float:
        """The quality of the units ``taken`` (measured once)."""
        columns = tuple(columns_of(taken))
        if columns not in self.measured:
            self.measured[columns] = float(self.score(columns))
            self.subsets[columns] = list(taken)
        return self.measured[columns]

    def forward(self, chosen: list[Unit], quality: float, pool: list[Unit], budget: float | None, steps: int,
                path: list[list[Unit]], by_ratio: bool, lazy: tuple[dict, set] | None = None) -> float:
        """Add units to ``chosen`` (in place, each step's subset appended to ``path``) while one gains, the one of
        the largest gain per unit of cost (``by_ratio``) or of the largest gain; returns the last subset's
        quality. ``lazy``: the bounds and the units measured against ``chosen`` of an earlier call on the same
        subset (:meth:`nested`), updated in place."""
        # each unit's last measured score (an upper bound, by the rule), and the units measured against the subset
        bound, fresh = ({u: np.inf for u in pool}, set()) if lazy is None else lazy
        rank: dict[Unit, int] = {}
        for i, u in enumerate(pool):
            rank.setdefault(u, i)  # ties go by the first place in pool

        def key(u: Unit) -> tuple[float, int]:
            return -bound[u], rank[u]

        while len(path) < steps:
            spent, taken = price_of(chosen), set(chosen)
            fits = sorted((u for u in pool if u not in taken and (budget is None or spent + u.cost <= budget)), key=key)
            picked = None
            while fits:
                unit = fits[0]
                if unit in fresh:
                    picked = unit
                    break
                bound[unit] = (self.measure(chosen + [unit]) - quality) / (unit.cost if by_ratio else 1.0)
                fresh.add(unit)
                fits.sort(key=key)
            if picked is None or (bound[picked] <= 0 and chosen):  # the first unit is a step in any case
                break
            chosen.append(picked)
            quality = self.measure(chosen)
            path.append(list(chosen))
            fresh.clear()
        return quality

    def nested(self, chosen: list[Unit], pool: list[Unit], levels) -> list[Unit]:
        """A nested ladder of subsets: from ``chosen`` (in place), forward by gain per unit of cost within each of the
        rising ``levels`` of price in turn, each level going on from the subset of the one below (the bounds of the
        lazy search kept from level to level); the units in the order taken."""
        lazy: tuple[dict, set] = ({u: np.inf for u in pool}, set())
        quality = self.measure(chosen) if chosen else self.empty
        path: list[list[Unit]] = []
        for level in levels:
            quality = self.forward(chosen, quality, pool, level, len(pool), path, True, lazy)
        return chosen

    def prune(self, chosen: list[Unit], quality: float, path: list[list[Unit]]) -> tuple[list[Unit], float]:
        """Drop each unit of ``chosen`` (the costliest first) whose absence loses nothing; the pruned subset is a
        step of ``path`` when it differs."""
        kept = list(chosen)
        for unit in sorted(chosen, key=lambda u: (-u.cost, chosen.index(u))):
            rest = [u for u in kept if u is not unit]
            if rest and unit.cost > 0 and self.measure(rest) >= quality:
                kept, quality = rest, self.measure(rest)
        if len(kept) < len(chosen):
            path.append(list(kept))
        return kept, quality

    def exchange(self, chosen: list[Unit], quality: float, pool: list[Unit], budget: float | None, steps: int,
                 path: list[list[Unit]]) -> float:
        """Improve ``chosen`` (in place, each new subset appended to ``path``) by exchanges of one priced unit for one
        of ``pool`` within ``budget``, then forward, for EXCHANGE_ROUNDS rounds (see the module); returns the last
        subset's quality."""
        free = [u for u in chosen if u.cost == 0]
        alone = {u: self.measure(free + [u]) - (self.measure(free) if free else self.empty) for u in pool
                 if tuple(columns_of(free + [u])) in self.measured}  # a unit's gain alone, where the runs measured it
        for _ in range(EXCHANGE_ROUNDS):
            spent = price_of(chosen)
            bounds = []
            for out in (u for u in chosen if u.cost > 0):
                rest = [u for u in chosen if u is not out]
                without = self.measure(rest) if rest else self.empty
                bounds += [(without + gain, out, unit) for unit, gain in alone.items() if unit not in chosen and
                           (budget is None or spent - out.cost + unit.cost <= budget)]
            bounds.sort(key=lambda b: -b[0])
            best, picked = quality, None
            for bound, out, unit in bounds[:EXCHANGE_MEASURES]:
                if bound <= best:
                    break
                candidate = [u for u in chosen if u is not out] + [unit]
                if self.measure(candidate) > best:
                    best, picked = self.measure(candidate), candidate
            if picked is None:
                break
            chosen[:] = picked
            path.append(list(chosen))
            quality = self.forward(chosen, best, pool, budget, len(path) + steps, path, True)
        return quality

    def runs(self, pool: list[Unit], budget: float | None, steps: int) -> list[list[list[Unit]]]:
        """The paths of every run of the search within ``budget``: by gain per unit of cost, by gain, then by gain
        per unit of cost among the units priced below the costliest unit of each of their answers (the next price
        down): a costly unit that gains the most per unit of cost alone can crowd out cheaper units that gain more
        together, which a run without it finds; last, the exchanges from the best answer of them (when they
        improve it)."""
        paths = [self.run(pool, budget, steps, True), self.run(pool, budget, steps, False)]
        prices = np.unique([u.cost for u in pool if u.cost > 0])
        caps = sorted({prices[prices < max(u.cost for u in path[-1])].max(initial=0.0) for path in paths if path})
        for cap in caps:
            if cap > 0:
                paths.append(self.run([u for u in pool if u.cost <= cap], budget, steps, True))
        answers = [max(path, key=lambda step: (self.measure(step), -price_of(step))) for path in paths if path]
        if answers:
            chosen = list(max(answers, key=lambda step: (self.measure(step), -price_of(step))))
            path: list[list[Unit]] = []
            self.exchange(chosen, self.measure(chosen), [u for u in pool if u.cost > 0], budget, steps, path)
            if path:
                paths.append(path)
        return paths

    def run(self, pool: list[Unit], budget: float | None, steps: int, by_ratio: bool) -> list[list[Unit]]:
        """One search within ``budget``: forward, backward pruning, forward again once if it pruned; its path."""
        chosen = [u for u in pool if u.cost == 0]
        pool = [u for u in pool if u.cost > 0]
        path: list[list[Unit]] = []
        quality = self.empty
        if chosen:
            quality = self.measure(chosen)
            path.append(list(chosen))
        quality = self.forward(chosen, quality, pool, budget, steps, path, by_ratio)
        pruned, quality = self.prune(chosen, quality, path)
        if len(pruned) < len(chosen) and len(path) < steps:  # the budget freed: forward again, once
            self.forward(pruned, quality, pool, budget, steps, path, by_ratio)
        return path
