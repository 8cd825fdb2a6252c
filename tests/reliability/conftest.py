"""The reliability tier: every test below this folder is marked ``reliability``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
