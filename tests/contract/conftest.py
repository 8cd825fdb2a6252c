"""The contract tier: every test below this folder is marked ``contract``."""

from helpers.tiers import marking


pytest_collection_modifyitems = marking(__file__)
