"""Every data loader of the package and its bundled data (``datasets/data/``, each folder with its licence).

Loaders are named after their data set and return ``(X, y)``, a ``RankingData``, or ``(X, y, costs)`` for
the synthetic sets that come with their costs (``cube``: a dict of its splits and costs). The papers' public
data sets are read from the user's copy in their public formats (nothing is downloaded): ``covertype``,
``miniboone``, ``hepmass`` return ``(X, y)``; ``mslr`` returns {"train", "valid", "test"} of ``(X, y, group)``.
``read_cost_file`` reads the cost file such data sets ship (the Yahoo! LTR format, with group lines).
"""

from lightgbm_cegb.datasets.cost_files import read_cost_file
from lightgbm_cegb.datasets.cube import CUBE_SEEDS, cube
from lightgbm_cegb.datasets.loaders import (
                                            COVERTYPE_FEATURES,
                                            HIGGS_COSTS,
                                            HIGGS_FEATURES,
                                            MSLR_NUM_FEATURES,
                                            NUM_HIGH_LEVEL,
                                            NUM_LOW_LEVEL,
                                            RankingData,
                                            covertype,
                                            hepmass,
                                            higgs,
                                            letter,
                                            load_svmlight,
                                            miniboone,
                                            mslr,
                                            mslr_subset,
                                            quadrants,
                                            yahoo_costs,
)

__all__ = ["COVERTYPE_FEATURES", "CUBE_SEEDS", "HIGGS_COSTS", "HIGGS_FEATURES", "MSLR_NUM_FEATURES",
           "NUM_HIGH_LEVEL", "NUM_LOW_LEVEL", "RankingData", "covertype", "cube", "hepmass", "higgs", "letter",
           "load_svmlight", "miniboone", "mslr", "mslr_subset", "quadrants", "read_cost_file", "yahoo_costs"]
