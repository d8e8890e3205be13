"""Mixtures of packs: the sources file of a packing array, the array task, ``mixture.json``."""
