"""What the memory API accepts and returns (Synapse's shapes, AKIRA's bounds).

Request bodies are pydantic models checked field by field with the same normalisers the
chat commands use (core.storage.sqlite_memories), so a bad value is refused here with the
field's name, before anything is stored. Their JSON schemas feed ``/openapi.json``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from core.storage.sqlite_memories import (
    MAX_CONTENT_CHARS,
    MAX_TAGS,
    Category,
    MemoryValidationError,
    Priority,
    Source,
    StructuredMemory,
    normalise_content,
    normalise_key,
    normalise_tags,
    parse_category,
    parse_priority,
)

# Epoch seconds accepted for expires_at: up to the year 9999 (datetime's own limit).
MAX_EPOCH = 253_402_300_799
MAX_WITHIN_S = 100 * 365 * 86400  # /memory/expiring?within=: up to a century
MAX_LIMIT = 500


class FieldError(ValueError):
    """A request value that cannot be used: answered 400 ``{"error", "field"}``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"error": self.message, "field": self.field}


def _checked(fn: Any, value: Any) -> Any:
    try:
        return fn(value)
    except MemoryValidationError as exc:
        raise ValueError(str(exc)) from None


def parse_expiry(value: float | str | None) -> datetime | None:
    """Epoch seconds (Synapse's form) or an ISO 8601 time; None = no expiry."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("expires_at is epoch seconds or an ISO 8601 time")
    if isinstance(value, int | float):
        if not 0 <= value <= MAX_EPOCH or value != value:  # value != value: NaN
            raise ValueError("expires_at is out of range")
        return datetime.fromtimestamp(float(value), tz=UTC)
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError("expires_at is epoch seconds or an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Body(BaseModel):
    # strict: 5 is not a string and "0.5" is not a number; unknown fields are named.
    model_config = ConfigDict(strict=True, extra="forbid")


def _after(fn: Any) -> AfterValidator:
    return AfterValidator(lambda value: _checked(fn, value))


def _valid_expiry(value: float | str | None) -> float | str | None:
    parse_expiry(value)
    return value


def _valid_source(value: str) -> str:
    try:
        return Source(value.strip().lower()).value
    except ValueError:
        raise ValueError("source is one of: user, agent, tool, system") from None


CategoryName = Annotated[str, _after(lambda v: parse_category(v).value)]
Content = Annotated[str, _after(normalise_content)]
Key = Annotated[str, _after(normalise_key)]
Tags = Annotated[list[str], _after(normalise_tags)]
PriorityName = Annotated[str, _after(lambda v: parse_priority(v).value)]
SourceName = Annotated[str, AfterValidator(_valid_source)]
Expiry = Annotated[float | str | None, AfterValidator(_valid_expiry)]


class StoreMemory(_Body):
    """``POST /memory``: store, or update the memory with the same category and key."""

    category: CategoryName = Field(json_schema_extra={"enum": [c.value for c in Category]})
    content: Content = Field(
        description="what to remember",
        json_schema_extra={"minLength": 1, "maxLength": MAX_CONTENT_CHARS},
    )
    key: Key | None = Field(
        default=None,
        description="snake_case name, unique in the category: storing it again updates it "
        "(default: derived from the content)",
    )
    tags: Tags = Field(default_factory=list, json_schema_extra={"maxItems": MAX_TAGS})
    priority: PriorityName = Field(
        default="normal", json_schema_extra={"enum": [p.value for p in Priority]}
    )
    source: SourceName | None = Field(
        default=None,
        description="with a Mind Key always agent",
        json_schema_extra={"enum": [*(s.value for s in Source), None]},
    )
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    expires_at: Expiry = Field(default=None, description="epoch seconds or ISO 8601; null: never")

    def memory_key(self) -> str:
        """The key given, or one derived from the content (the same content stored twice
        without a key is one memory, as a retried request should be)."""
        if self.key:
            return self.key
        return f"{self.category}_{hashlib.sha256(self.content.encode()).hexdigest()[:12]}"


class UpdateMemory(_Body):
    """``PUT /memory/{id}``: change some fields; the earlier version is kept."""

    content: Content | None = None
    tags: Tags | None = None
    priority: PriorityName | None = None
    expires_at: Expiry = Field(
        default=None, description="epoch seconds or ISO 8601; null clears it"
    )


M = TypeVar("M", bound=BaseModel)


def parse_body(model: type[M], data: Any) -> M:
    """``model`` from decoded JSON, or FieldError naming the first bad field."""
    if not isinstance(data, dict):
        raise FieldError("body", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "body"
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        if first.get("type") == "extra_forbidden":
            message = "unknown field"
        raise FieldError(field, f"{field}: {message}") from None


def query_int(query: Any, name: str, default: int, *, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise FieldError(name, f"{name} must be a whole number") from None
    if not low <= value <= high:
        raise FieldError(name, f"{name} must be between {low} and {high}")
    return value


def memory_json(memory: StructuredMemory) -> dict[str, Any]:
    return {**memory.to_dict(), "mind": memory.owner}


def memories_json(memories: list[StructuredMemory]) -> dict[str, Any]:
    return {"memories": [memory_json(m) for m in memories], "count": len(memories)}


CATEGORIES = [c.value for c in Category]
PRIORITIES = [p.value for p in Priority]
