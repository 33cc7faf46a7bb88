"""CEGB on the patched LightGBM: scikit-learn estimators, training callbacks and the trade-off's scale."""

from lightgbm_cegb.lgbm.callbacks import budget_stopping, record_cost, start_from
from lightgbm_cegb.lgbm.estimators import CEGBClassifier, CEGBRanker, CEGBRegressor
from lightgbm_cegb.lgbm.scales import cegb_tradeoff_scale

__all__ = ["CEGBClassifier", "CEGBRanker", "CEGBRegressor", "budget_stopping", "cegb_tradeoff_scale",
           "record_cost", "start_from"]
