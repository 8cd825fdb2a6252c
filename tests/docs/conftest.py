"""The docs tier: every test below this folder is marked ``docs``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
