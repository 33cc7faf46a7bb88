"""Models in and out: LightGBM model text and scikit-learn trees read into a Forest (``to_forest``), the
package's saved-model format (``io.saved``), the CEGB ledger and atomic writes."""

from lightgbm_cegb.io.ledger import CEGBState
from lightgbm_cegb.io.models import to_forest

__all__ = ["CEGBState", "to_forest"]
