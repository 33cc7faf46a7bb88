"""The budgeted-learning methods of the papers, one module or subpackage per family.

Every estimator here follows the contract of :class:`lightgbm_cegb.base.BudgetedEstimator`. Methods never
import :mod:`lightgbm_cegb.selection`: selection adapts them (``tests/test_layers.py``).
"""

from lightgbm_cegb.methods.acquisition import AcquisitionResult, AdaptiveAcquisitionClassifier
from lightgbm_cegb.methods.adapt import AdaptGBRT, AdaptL1, AdaptLIN
from lightgbm_cegb.methods.budget_prune import Pruner, PruneResult, budget_prune, budget_prune_path
from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier
from lightgbm_cegb.methods.cascade import CascadeResult, StagedAcquisitionRanker
from lightgbm_cegb.methods.cstc import CSCC, CSTC, Cronus, CSTCClassifier
from lightgbm_cegb.methods.early_exit import EarlyExit, EarlyExitResult
from lightgbm_cegb.methods.greedy_miser import GreedyMiserClassifier, GreedyMiserRanker, GreedyMiserRegressor
from lightgbm_cegb.methods.staged import StagedAcquisitionClassifier
from lightgbm_cegb.methods.staged_regressor import StagedAcquisitionRegressor, StagedRegressionResult

__all__ = ["CSCC", "CSTC", "AcquisitionResult", "AdaptGBRT", "AdaptiveAcquisitionClassifier", "AdaptL1", "AdaptLIN",
           "BudgetRFClassifier", "CSTCClassifier", "CascadeResult", "Cronus", "EarlyExit", "EarlyExitResult",
           "GreedyMiserClassifier", "GreedyMiserRanker", "GreedyMiserRegressor", "PruneResult", "Pruner",
           "StagedAcquisitionClassifier", "StagedAcquisitionRanker", "StagedAcquisitionRegressor",
           "StagedRegressionResult", "budget_prune", "budget_prune_path"]
