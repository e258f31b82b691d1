"""The default stages of the message pipeline, in their default order."""

from core.stages.basic import (
    CleanStage,
    DeliverStage,
    GenerateStage,
    GuardStage,
    IdentifyStage,
    PersistStage,
    PromptStage,
    RecallStage,
    RememberStage,
    ThrottleStage,
)

__all__ = [
    "CleanStage",
    "DeliverStage",
    "GenerateStage",
    "GuardStage",
    "IdentifyStage",
    "PersistStage",
    "PromptStage",
    "RecallStage",
    "RememberStage",
    "ThrottleStage",
]
