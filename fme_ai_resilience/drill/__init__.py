"""The drill: the whole pipeline on loopback, with stand-ins for the world outside it.

:mod:`fme_ai_resilience.drill.standins` holds the stand-ins (a fault-injecting Vision AI
service, a photo host, an ArcGIS feature layer and the Survey123 field app as a sender); the
``fme-ai-resilience drill`` command and the pipeline's integration tests run against them.
"""
from __future__ import annotations

__all__: list = []
