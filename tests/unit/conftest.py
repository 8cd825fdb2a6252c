"""The unit tier: every test below this folder is marked ``unit``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
