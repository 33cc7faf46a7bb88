"""The one exception type of lightgbm_cegb."""


class CEGBError(ValueError):
    """Invalid input to lightgbm_cegb; the message names the parameter, what was expected and what was got."""
