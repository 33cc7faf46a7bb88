"""Adaptive gating (Nan and Saligrama, NIPS 2017): ADAPT-GBRT (``gbrt``) and ADAPT-LIN (``lin``) on a shared base."""

from lightgbm_cegb.methods.adapt.adapt_base import routing_weights
from lightgbm_cegb.methods.adapt.gbrt import AdaptGBRT
from lightgbm_cegb.methods.adapt.lin import AdaptL1, AdaptLIN

__all__ = ["AdaptGBRT", "AdaptL1", "AdaptLIN", "routing_weights"]
