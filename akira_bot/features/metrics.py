"""Built-in plugin: Prometheus metrics of the pipeline, set up when the HTTP side serves
``/metrics`` (``AKIRA_HTTP__PORT`` set), after every other plugin, so the ``metrics``
stage goes first in the final pipeline and times the ``generate`` stage the others left.
Without the HTTP side nothing is counted (nor prometheus_client imported)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akira_bot.plugins import PluginAPI


def setup(api: PluginAPI) -> None:
    from akira_bot.http.metrics import install_stages

    install_stages(api.pipeline)
