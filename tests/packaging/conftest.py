"""The packaging tier: every test below this folder is marked ``packaging``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
