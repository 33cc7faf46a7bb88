"""Every data loader of the package and its bundled data (``datasets/data/``, each folder with its licence).

Loaders are named after their data set and return ``(X, y)``, a ``RankingData``, or ``(X, y, costs)`` for
the synthetic sets that come with their costs.
"""

from lightgbm_cegb.datasets.loaders import (
                                            HIGGS_COSTS,
                                            HIGGS_FEATURES,
                                            NUM_HIGH_LEVEL,
                                            NUM_LOW_LEVEL,
                                            RankingData,
                                            higgs,
                                            letter,
                                            load_svmlight,
                                            mslr_subset,
                                            quadrants,
                                            yahoo_costs,
)

__all__ = ["HIGGS_COSTS", "HIGGS_FEATURES", "NUM_HIGH_LEVEL", "NUM_LOW_LEVEL", "RankingData", "higgs", "letter",
           "load_svmlight", "mslr_subset", "quadrants", "yahoo_costs"]
