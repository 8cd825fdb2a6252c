"""The system tier: every test below this folder is marked ``system``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
