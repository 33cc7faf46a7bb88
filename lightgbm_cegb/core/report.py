"""The prediction cost of a model on a set of rows, as a report."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CostReport:
    """Prediction cost of a model on a set of rows.

    Returned by :func:`prediction_cost` and :meth:`CostState.report`; frozen.

    Parameters
    ----------
    acquisition : ndarray of shape (n_rows,)
        Per row: the lazy costs of the distinct features the row's paths test (and of their groups, each
        once).
    evaluation : ndarray of shape (n_rows,)
        Per row: the split costs of the split nodes traversed, plus the trees' costs.
    coupled : float
        The coupled costs of the features the model uses (and of their groups), paid once per model.
    usage : ndarray of shape (n_features,)
        Per feature: the fraction of rows whose paths test it.
    curve : ndarray of shape (n_iterations,) or None, default=None
        The mean per-row cost after each iteration (``prediction_cost(..., per_iteration=True)``).
    feature_names : list of str or None, default=None
        The model's feature names, for :attr:`usage_by_name`.
    group_usage : dict of str to float or None, default=None
        With feature groups: the fraction of rows paying each group, by group name.
    """

    acquisition: np.ndarray  # per row: lazy costs of the distinct features the row's paths test
    evaluation: np.ndarray  # per row: split costs of the split nodes traversed, plus the trees' costs
    coupled: float  # coupled costs of the features the model uses (once per model)
    usage: np.ndarray  # per feature: fraction of rows whose paths test it
    curve: np.ndarray | None = None  # mean per-row cost after each iteration (per_iteration=True)
    feature_names: list[str] | None = None  # the model's feature names, for usage_by_name
    group_usage: dict[str, float] | None = None  # with feature groups: fraction of rows paying each group

    @property
    def per_instance(self) -> np.ndarray:
        """Total cost of each row: ``acquisition + evaluation`` (the coupled cost not included)."""
        return self.acquisition + self.evaluation

    @property
    def mean(self) -> float:
        """Mean per-row cost (:attr:`per_instance`'s mean; 0.0 without rows)."""
        return float(self.per_instance.mean()) if self.per_instance.size else 0.0

    @property
    def usage_by_name(self) -> dict[str, float]:
        """Share of rows whose paths test each feature, by the model's feature names (Column_i without)."""
        names = self.feature_names or [f"Column_{i}" for i in range(len(self.usage))]
        return dict(zip(names, self.usage.tolist()))

    @classmethod
    def stacked(cls, reports: list[CostReport]) -> CostReport:
        """One report of the rows of several reports of one model, in their order (the partitions of a Dask
        collection): the per-row costs concatenated, each share of rows (``usage``, ``group_usage``) and the
        ``curve`` weighted by the reports' rows; the coupled cost and the names are the first report's.

        Parameters
        ----------
        reports : list of CostReport
            At least one; of the same model and costs.

        Returns
        -------
        CostReport
            The rows of all: each share equal to the one report of all the rows would give (its numerators are
            counts of rows), the curve to rounding.
        """
        first = reports[0]
        rows = np.array([report.acquisition.size for report in reports], dtype=np.float64)
        n = max(rows.sum(), 1.0)

        def shares(values: list) -> np.ndarray:  # each report's share x its rows is a count of rows: exact again
            return np.rint(sum(np.asarray(v, dtype=np.float64) * k for v, k in zip(values, rows))) / n

        group_usage = None
        if first.group_usage is not None:
            names = list(first.group_usage)
            counts = shares([[report.group_usage[name] for name in names] for report in reports])
            group_usage = dict(zip(names, counts.tolist()))
        curve = None if first.curve is None else \
            sum(report.curve * k for report, k in zip(reports, rows)) / n
        return cls(acquisition=np.concatenate([report.acquisition for report in reports]),
                   evaluation=np.concatenate([report.evaluation for report in reports]), coupled=first.coupled,
                   usage=shares([report.usage for report in reports]), curve=curve,
                   feature_names=first.feature_names, group_usage=group_usage)

    def to_dict(self) -> dict:
        """A JSON-ready summary (without the per-row arrays).

        Returns
        -------
        dict
            ``rows``, ``mean``, ``mean_acquisition``, ``mean_evaluation``, ``coupled``, ``usage`` (by name,
            as :attr:`usage_by_name`), and ``group_usage`` (with groups) and ``curve`` (a list, when
            computed).
        """
        out = {"rows": int(self.per_instance.size), "mean": self.mean,
               "mean_acquisition": float(self.acquisition.mean()) if self.acquisition.size else 0.0,
               "mean_evaluation": float(self.evaluation.mean()) if self.evaluation.size else 0.0,
               "coupled": self.coupled, "usage": self.usage_by_name,
               **({} if self.group_usage is None else {"group_usage": self.group_usage})}
        if self.curve is not None:
            out["curve"] = self.curve.tolist()
        return out


