"""lightgbm-cegb: cost-efficient gradient boosting on a patched LightGBM 4.7.0.

``import lightgbm`` in this environment is the patched build (``lightgbm.__version__`` ends in
``+cegb.N``); this package adds prediction-cost accounting and budgeted-learning tools around it.

Subpackages, lowest layer first (``tests/test_layers.py`` enforces the order): ``core`` (the cost model and
exact accounting), ``io`` (model readers, the saved-model format), ``datasets``, ``lgbm`` (CEGB on
LightGBM), ``serving`` (lazy feature acquisition), ``methods`` (the papers' methods), ``selection`` (sweeps
and selection under a budget). The names below are the public API.
"""

import warnings

import lightgbm

from lightgbm_cegb._version import __version__
from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.core import (
    BudgetWarning,
    CEGBError,
    CEGBWarning,
    CostReport,
    FeatureCosts,
    LightGBMCEGBError,
    NoSplitWarning,
    NotFittedError,
    RoundsWarning,
)
from lightgbm_cegb.io import to_forest
from lightgbm_cegb.lgbm import CEGBClassifier, CEGBRanker, CEGBRegressor
from lightgbm_cegb.methods import (
    CSCC,
    CSTC,
    AcquisitionResult,
    AdaptGBRT,
    AdaptiveAcquisitionClassifier,
    AdaptL1,
    AdaptLIN,
    BudgetRFClassifier,
    CascadeResult,
    Cronus,
    CSTCClassifier,
    EarlyExit,
    EarlyExitResult,
    GreedyMiserClassifier,
    GreedyMiserRanker,
    GreedyMiserRegressor,
    Pruner,
    PruneResult,
    StagedAcquisitionClassifier,
    StagedAcquisitionRanker,
    StagedAcquisitionRegressor,
    StagedRegressionResult,
    budget_prune,
    budget_prune_path,
)
from lightgbm_cegb.serving import LazyFetchError, LazyFetchValueError, LazyPredictor, LazyResult

__all__ = ["AcquisitionResult", "AdaptGBRT", "AdaptL1", "AdaptLIN", "AdaptiveAcquisitionClassifier",
           "BudgetRFClassifier", "BudgetWarning", "CEGBClassifier", "CEGBError", "CEGBRanker", "CEGBRegressor",
           "CEGBWarning", "CSCC", "CSTC", "CSTCClassifier", "CascadeResult", "CostReport", "Cronus", "EarlyExit",
           "EarlyExitResult", "FeatureCosts", "GreedyMiserClassifier", "GreedyMiserRanker", "GreedyMiserRegressor",
           "LazyFetchError", "LazyFetchValueError", "LazyPredictor", "LazyResult", "LightGBMCEGBError",
           "NoSplitWarning", "NotFittedError", "PATCHED_LIGHTGBM", "PruneResult", "Pruner", "RoundsWarning",
           "StagedAcquisitionClassifier", "StagedAcquisitionRanker", "StagedAcquisitionRegressor",
           "StagedRegressionResult", "__version__", "budget_prune", "budget_prune_path", "prediction_cost", "to_forest"]

#: True when the imported lightgbm is the patched build of this project.
PATCHED_LIGHTGBM = "+cegb." in lightgbm.__version__
if not PATCHED_LIGHTGBM:
    warnings.warn(
        f"lightgbm {lightgbm.__version__} is not the patched build (4.7.0+cegb.N): its CEGB training has "
        "known bugs (see patches/). To get it, run 'make wheels' in a lightgbm-cegb checkout and then "
        "'pip install --find-links dist lightgbm-cegb', or run 'make demo' there.",
        stacklevel=2,
    )
