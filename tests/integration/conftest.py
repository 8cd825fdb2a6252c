"""The integration tier: every test below this folder is marked ``integration``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
