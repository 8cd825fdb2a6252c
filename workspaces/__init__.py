"""The WS-01, WS-02 and WS-03 templates: each PythonCaller's script (the source of truth) and
the ``.fmw`` that ``fme-ai-resilience workspaces build`` writes from it.

``setup.cfg`` maps this directory into the package as ``fme_ai_resilience.workspaces``
(``package_dir``), so an installed wheel carries the very scripts the templates embed;
``fme_ai_resilience.testing.templates`` reads them (the drill's engines run WS-02's).
"""
