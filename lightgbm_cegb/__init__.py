"""lightgbm-cegb: cost-efficient gradient boosting on a patched LightGBM 4.7.0.

``import lightgbm`` in this environment is the patched build (``lightgbm.__version__`` ends in
``+cegb.N``); this package adds prediction-cost accounting and budgeted-learning tools around it.
"""

import warnings

import lightgbm

from .accounting import CostReport, prediction_cost
from .adapt import AdaptGBRT
from .adapt_lin import AdaptLIN
from .budgetrf import BudgetRFClassifier
from .cost_state import CostState
from .cstc import CSCC, CSTC, CSTCClassifier, Cronus
from .costs import FeatureCosts
from .early_exit import EarlyExit, EarlyExitResult
from .errors import CEGBError
from .forest import Forest
from .greedy_miser import GreedyMiserClassifier, GreedyMiserRanker, GreedyMiserRegressor
from .lazy import LazyFetchError, LazyPredictor, LazyResult
from .ledger import CEGBState
from .models import to_forest
from .prune import Pruner, PruneResult, budget_prune, budget_prune_path

__version__ = "0.1.0"
__all__ = ["AdaptGBRT", "AdaptLIN", "BudgetRFClassifier", "CEGBError", "CEGBState", "CostReport", "CostState", "CSCC", "CSTC",
           "CSTCClassifier", "Cronus", "EarlyExit", "EarlyExitResult",
           "FeatureCosts", "Forest", "GreedyMiserClassifier", "GreedyMiserRanker", "GreedyMiserRegressor",
           "LazyFetchError", "LazyPredictor", "LazyResult", "PATCHED_LIGHTGBM", "PruneResult", "Pruner",
           "budget_prune", "budget_prune_path", "prediction_cost", "to_forest"]

#: True when the imported lightgbm is the patched build of this project.
PATCHED_LIGHTGBM = "+cegb." in lightgbm.__version__
if not PATCHED_LIGHTGBM:
    warnings.warn(
        f"lightgbm {lightgbm.__version__} is not the patched build (4.7.0+cegb.N): its CEGB training has "
        "known bugs (see patches/). Run 'make demo' or 'make test' in the lightgbm-cegb checkout to build it.",
        stacklevel=2,
    )
