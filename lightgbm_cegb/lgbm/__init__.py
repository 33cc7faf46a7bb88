"""CEGB on the patched LightGBM: scikit-learn estimators, training callbacks, the trade-off's scale and named
feature groups in a booster's model text."""

from lightgbm_cegb.io.models import name_groups
from lightgbm_cegb.lgbm.callbacks import budget_stopping, record_cost, start_from
from lightgbm_cegb.lgbm.cegb_estimators import CEGBClassifier, CEGBRanker, CEGBRegressor
from lightgbm_cegb.lgbm.cegb_tradeoff_scale import cegb_tradeoff_scale

__all__ = ["CEGBClassifier", "CEGBRanker", "CEGBRegressor", "budget_stopping", "cegb_tradeoff_scale", "name_groups",
           "record_cost", "start_from"]
