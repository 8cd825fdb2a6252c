"""The ledger's SQL: the DDL and the named queries of both dialects, as plain ``.sql`` files.

This directory is the one copy. ``setup.cfg`` maps it into the package as
``fme_ai_resilience.store.sql`` (``package_dir``), so wheels, sdists and editable installs all
ship and find the same files; ``fme_ai_resilience.store.sqlfiles`` reads them with
``importlib.resources``.
"""
