"""Feature: Prometheus metrics of the pipeline, when the HTTP side serves ``/metrics``.

Installed last, so the ``metrics`` stage goes first in the final pipeline and the
``generate`` stage it times is the one the other features left. Nothing is counted
(nor prometheus_client imported) when ``AKIRA_HTTP__PORT`` is unset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akira_bot.settings import Settings
    from core.commands import CommandRouter
    from core.pipeline import Pipeline
    from core.services import Services


def install(
    settings: Settings, services: Services, pipeline: Pipeline, router: CommandRouter
) -> None:
    if settings.http.port is None:
        return
    from akira_bot.http.metrics import install_stages

    install_stages(pipeline)
