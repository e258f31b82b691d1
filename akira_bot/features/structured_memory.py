"""Built-in plugin ``structured_memories`` (the Synapse model).

Sets up the service (``services.structured_memories``), the
``structured_recall`` stage after ``recall`` (the recall text joins the prompt each turn)
and, unless switched off, background extraction of memories by the LLM after each reply.

``settings.memory.extraction`` switches extraction. When it is not set explicitly it is on
only with a real model endpoint (provider ``openai``): the embedded ``local`` model
(SmolLM2-135M) cannot produce reliable JSON and would only spend CPU on output we reject,
and the ``scripted`` provider's script is meant for replies (an extraction call would eat
its entries). Set ``AKIRA_MEMORY__EXTRACTION=true`` to force it on with any provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.memory.extraction import MemoryExtractor
from core.memory.structured import EXTRAS_KEY, StructuredMemories, StructuredRecallStage

if TYPE_CHECKING:
    from akira_bot.plugins import PluginAPI
    from akira_bot.settings import Settings


def extraction_enabled(settings: Settings) -> bool:
    if "extraction" in settings.memory.model_fields_set:
        return settings.memory.extraction
    return settings.memory.extraction and settings.llm.provider not in ("local", "scripted")


def setup(api: PluginAPI) -> None:
    settings, services, pipeline = api.settings, api.services, api.pipeline
    memories = StructuredMemories(services.storage.memories, storage=services.storage)
    services.structured_memories = memories
    services.extras[EXTRAS_KEY] = memories  # older string-keyed access
    stage = StructuredRecallStage(memories)
    if "recall" in pipeline.names:
        pipeline.add(stage, after="recall")
    else:  # a custom pipeline without the default recall stage
        pipeline.add(stage, before="prompt" if "prompt" in pipeline.names else None)
    if extraction_enabled(settings):
        extractor = MemoryExtractor(
            memories, services.llm, concurrency=settings.memory.extraction_concurrency
        )
        services.memory_extractor = extractor
        services.extras["memory_extractor"] = extractor
        services.after_reply.append(extractor)
