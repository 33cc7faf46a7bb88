"""The cost model and exact accounting: FeatureCosts, Forest, CostState, CostReport, trade-off scales.

The bottom layer of the package: it imports nothing of lightgbm_cegb above it (``tests/test_layers.py``).
"""

from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import (
    BudgetWarning,
    CEGBError,
    CEGBWarning,
    LightGBMCEGBError,
    NoSplitWarning,
    NotFittedError,
    RoundsWarning,
)
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.report import CostReport

__all__ = ["BudgetWarning", "CEGBError", "CEGBWarning", "CostReport", "CostState", "FeatureCosts", "Forest",
           "LightGBMCEGBError", "NoSplitWarning", "NotFittedError", "RoundsWarning"]
