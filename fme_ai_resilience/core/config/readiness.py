"""What a deployment's settings leave impossible: the start-up check of ``serve``, ``process``
and the intake and processor PythonCallers.

Besides ``vision.endpoint`` (without which the processor is not built at all), two things
only the deployment can name have empty defaults that cannot work: the photo hosts
(``intake.feature_services`` and ``download.allowed_hosts``: with both empty every photo is
refused) and, for the ``feature_layer`` sink, a layer the write-back may write to
(``intake.feature_services``, ``writeback.layer_url`` or ``writeback.table_url``). A
deployment without them would accept every webhook and then bury every photo as a dead
letter, so it is refused before it accepts or claims anything: :func:`gaps` says what is
missing, :func:`require_workable` raises :class:`ConfigurationError` naming the setting.
Intake (``serve``, WS-01) checks the photo hosts; the processor (``process``, WS-02) the
layer too, for the sink it writes through (docs/configuration.md, "Settings a deployment must
set").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import ConfigurationError
from .settings import Settings

__all__ = ["Gap", "gaps", "require_workable", "photo_hosts_configured"]


@dataclass(frozen=True)
class Gap:
    """A setting the deployment must set, and what cannot work without it."""

    setting: str
    reason: str

    def __repr__(self) -> str:
        return f"Gap({self.setting}: {self.reason})"


def photo_hosts_configured(settings: Settings) -> bool:
    """Whether any photo host is configured: a feature service or an allowed photo host (the
    download's allow-list is made of exactly these, ``DownloadPolicy.from_settings``)."""
    return bool(settings.intake.feature_services) or any(
        str(host).strip().rstrip(".") for host in settings.download.allowed_hosts)


def gaps(settings: Settings, *, writes: bool = True,
         sink: Optional[str] = None) -> Tuple[Gap, ...]:
    """What ``settings`` cannot do, each naming the setting to set; empty when nothing is
    missing.

    ``writes``: the write-back is checked too (the processor; intake, which cannot know
    where the processor writes, checks the photo hosts only). ``sink`` is the name of the
    sink the conclusions go to (``feature_layer``, ``table``, ``collect``; default
    ``writeback.sink``): only ``feature_layer`` needs a layer.
    """
    found = []
    if not photo_hosts_configured(settings):
        found.append(Gap("intake.feature_services", (
            "no photo can be downloaded: intake.feature_services (FAIR_INTAKE_FEATURE_SERVICES) "
            "and download.allowed_hosts (FAIR_DOWNLOAD_ALLOWED_HOSTS) are both empty; set the "
            "FeatureServer URLs this deployment serves (their hosts are the photo hosts) or "
            "the photo hosts")))
    w = settings.writeback
    if writes and (sink or w.sink) == "feature_layer" and not (
            settings.intake.feature_services or w.layer_url or w.table_url):
        found.append(Gap("writeback.layer_url", (
            "no layer can be written: writeback.sink is feature_layer and "
            "intake.feature_services, writeback.layer_url (FAIR_WRITEBACK_LAYER_URL) and "
            "writeback.table_url are all empty; set one of them, or writeback.sink to table "
            "or collect")))
    return tuple(found)


def require_workable(settings: Settings, *, writes: bool = True,
                     sink: Optional[str] = None) -> None:
    """Raise :class:`ConfigurationError` naming the first setting :func:`gaps` finds missing
    (the others follow in its reason); return when nothing is missing."""
    found = gaps(settings, writes=writes, sink=sink)
    if not found:
        return
    first, rest = found[0], found[1:]
    also = "".join(f"; also {gap.setting}: {gap.reason}" for gap in rest)
    raise ConfigurationError(first.setting, "", first.reason + also)
