"""lightgbm-cegb: cost-efficient gradient boosting on a patched LightGBM 4.7.0.

``import lightgbm`` in this environment is the patched build (``lightgbm.__version__`` ends in
``+cegb.N``); this package adds prediction-cost accounting and budgeted-learning tools around it.
"""

import warnings

import lightgbm

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.io.ledger import CEGBState
from lightgbm_cegb.io.models import to_forest
from lightgbm_cegb.methods.adapt.gbrt import AdaptGBRT
from lightgbm_cegb.methods.adapt.lin import AdaptLIN
from lightgbm_cegb.methods.budget_prune import Pruner, PruneResult, budget_prune, budget_prune_path
from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier
from lightgbm_cegb.methods.cstc import CSCC, CSTC, Cronus, CSTCClassifier
from lightgbm_cegb.methods.early_exit import EarlyExit, EarlyExitResult
from lightgbm_cegb.methods.greedy_miser import GreedyMiserClassifier, GreedyMiserRanker, GreedyMiserRegressor
from lightgbm_cegb.serving.lazy import LazyFetchError, LazyPredictor, LazyResult

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
