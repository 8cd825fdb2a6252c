"""The FME Package's help, as Safe's packager expects it: a short Quick Add text per
transformer (``transformers/<Name>.md``, no heading: Workbench adds one) and the full page
(``help/<Name>.md``, which ``fme-packager pack`` turns into the HTML F1 opens, its first
paragraph becoming the summary Quick Add shows).

Every page says how to wire ``<Rejected>``: Workbench's default *Rejected Feature Handling*
(Terminate Translation) turns an unconnected ``<Rejected>`` port into an abort of the whole
job at the first rejected feature, and the processor rejects its dead letters (a photo gone,
an answer out of schema, a key refused). docs/fme-flow.md, the FME Package.
"""
from __future__ import annotations

from typing import Sequence

from .fmxj import form_kind
from .fpkg import PACKAGE_UID, PUBLISHER_UID, Transformer
from .parameters import parameters_for

__all__ = ["quick_add", "transformer_help", "SAMPLE_WORKSPACE", "REJECTED_WIRING"]

#: The sample workspace shipped beside the help pages (``help/``).
SAMPLE_WORKSPACE = "fme-ai-resilience-sample.fmw"

_KINDS = {"password": "password", "json": "text (JSON)", "url": "URL", "number": "number",
          "integer": "whole number", "choice": "choice", "yesno": "yes or no",
          "web_connection": "web connection", "text": "text"}

#: What every page says about ``<Rejected>``.
REJECTED_WIRING = (
    "**Connect `<Rejected>`.** Connect it to a Logger (or a writer, or an Emailer). An "
    "unconnected `<Rejected>` port under Workbench's default *Rejected Feature Handling* "
    "(*Terminate Translation*) stops the whole job at the first rejected feature: on FME "
    "Flow, the first photo that is gone would fail every scheduled run. If you leave it "
    "unconnected, set *Navigator > Workspace Parameters > Translation > Rejected Feature "
    "Handling* to *Continue Translation*. The sample workspace "
    f"[{SAMPLE_WORKSPACE}]({SAMPLE_WORKSPACE}) in this package's help folder connects both "
    "ports of all three transformers.")


def quick_add(transformer: Transformer) -> str:
    """``transformers/<Name>.md``: what Workbench's Quick Add pane shows (no heading)."""
    return (f"{transformer.description} Connect its `<Rejected>` port: unconnected, the "
            "default Rejected Feature Handling ends the job at the first rejected feature.\n")


def transformer_help(transformer: Transformer, attributes: Sequence[str]) -> str:
    """``help/<Name>.md``: the transformer's full help page (Markdown)."""
    rows = "\n".join(f"| `{p.name}` | {p.prompt} | {_KINDS[form_kind(p)]} | "
                     f"{'yes' if p.required else 'no'} |"
                     for p in parameters_for(transformer.workspace))
    return (f"# {transformer.name} ({PUBLISHER_UID}.{PACKAGE_UID})\n\n"
            f"{transformer.description}\n\n"
            f"It runs `{transformer.symbol}` of the fme-ai-resilience library, the same logic "
            f"as the `{transformer.workspace}` template's PythonCaller.\n\n"
            "## Typical use\n\n"
            f"{_USE[transformer.workspace]}\n\n"
            "## Parameters\n\nBlank optional parameters take the library's defaults (or the "
            "ledger's `resilience_config` rows). Secrets are password fields: keep their "
            "values in FME Flow deployment parameters or web connections rather than typed "
            "into a job. A password FME hands over encrypted is decrypted by FME itself.\n\n"
            "| parameter | prompt | kind | required |\n| --- | --- | --- | --- |\n"
            f"{rows}\n\n## Output ports\n\n"
            "### Output\n\nOne new feature per result (never the input's attributes), "
            f"with these attributes: {', '.join(f'`{a}`' for a in attributes)}.\n\n"
            "### <Rejected>\n\nOnly what no retry can fix: a configuration that cannot work, "
            "an invalid body, a dead letter the compensator never requeues (a photo gone, an "
            "answer out of schema, a key refused). Each carries `fme_rejection_code` and "
            "`fme_rejection_message`. Everything retryable stays in the ledger and leaves "
            "through Output.\n\n"
            f"{REJECTED_WIRING}\n\n"
            "## After an upgrade\n\nRestart FME Form, and the FME Flow engines, after "
            "installing a new version of the package: an engine keeps the Python modules it "
            "imported until it restarts.\n")


_USE = {
    "WS-01_intake": "Creator or the FME Flow Automations reader (its `message` attribute) -> "
                    "FairIntake -> Logger on Output and a Logger on `<Rejected>`.",
    "WS-02_processor": "Creator (one feature per scheduled run) -> FairProcessor -> Logger "
                       "on Output and a Logger (or an Emailer) on `<Rejected>`.",
    "WS-03_compensator": "Creator (one feature per scheduled run) -> FairCompensator -> "
                         "Logger on Output (a Tester on `fair_kind` and an Emailer for the "
                         "notifications) and a Logger on `<Rejected>`.",
}
