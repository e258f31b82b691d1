"""Priority and expiry written in chat: ``/remember !high trip: Porto until 2026-12-31``.

Used by ``/remember`` and ``/memories edit``. A ``!word`` at the start or end of the text
is a priority (``!high``, ``!alta``...); a clause at the end is an expiry:

* ``until 2026-12-31`` / ``até 31/12/2026`` (also ``until next friday``, ``até o Natal``:
  the named day, week or month is included, see :mod:`core.memory.timeexpr`);
* ``for 2 weeks`` / ``por 2 semanas`` (hours, days, weeks, months, years);
* ``no expiry`` / ``sem validade`` (for an edit: never expires).

Dates are resolved against the message's time, never the clock. A clause that is clearly
meant as a date but cannot be read (``until 2026-13-45``), a date already past, and an
unknown ``!priority`` raise :class:`MemoryOptionError` so that nothing is stored. A text
that merely ends like a clause can keep it by ending with a full stop:
``I played guitar for 10 years.`` is all content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from dateutil.relativedelta import relativedelta

from core.embeddings.hashing import fold
from core.memory.structured import Priority
from core.memory.timeexpr import spans

MAX_YEARS_AHEAD = 100  # an expiry further away than this is a typo, not a plan

PRIORITY_WORDS: dict[str, Priority] = {
    "critical": Priority.CRITICAL,
    "critica": Priority.CRITICAL,  # crítica, folded
    "critico": Priority.CRITICAL,
    "urgent": Priority.CRITICAL,
    "urgente": Priority.CRITICAL,
    "high": Priority.HIGH,
    "alta": Priority.HIGH,
    "alto": Priority.HIGH,
    "normal": Priority.NORMAL,
    "low": Priority.LOW,
    "baixa": Priority.LOW,
    "baixo": Priority.LOW,
}

_WORD_PRIORITY = r"!(?P<word>[^\W\d_][\w-]{0,31})"
_LEADING_PRIORITY = re.compile(rf"^\s*{_WORD_PRIORITY}(?=\s|$)\s*", re.UNICODE)
_TRAILING_PRIORITY = re.compile(rf"(?:^|\s+){_WORD_PRIORITY}\s*$", re.UNICODE)
# Where an expiry clause may start: the last such word of the text is tried first.
_CLAUSE_WORD = re.compile(
    r"(?:^|\s)(?P<word>until|till|expires|expira|ate|até|for|por|durante)\s+(?=\S)",
    re.IGNORECASE | re.UNICODE,
)
_NO_EXPIRY = re.compile(
    r"(?:^|\s+)(?:no expiry|no expiration|never expires|sem validade|sem prazo|nao expira|"
    r"não expira)\s*$",
    re.IGNORECASE | re.UNICODE,
)
_RELATIVE = re.compile(
    r"^(?P<n>\d{1,4})\s*(?P<unit>hours?|h|horas?|days?|dias?|weeks?|semanas?|months?|"
    r"m[eê]s|meses|years?|anos?)$",
    re.IGNORECASE | re.UNICODE,
)
_ISO = re.compile(r"^(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})$")
_NUMERIC = re.compile(r"^(?P<a>\d{1,2})[/.](?P<b>\d{1,2})(?:[/.](?P<y>\d{2}|\d{4}))?$")
# Words around a named time that change nothing: "until the end of next week".
_FILLER = {"o", "a", "os", "as", "the", "de", "do", "da", "of", "end", "fim", "final", "on"}
# "the end of the month", "fim do mês": the article names the current one (a bare "month"
# names no time for the resolver: "once a month").
_END_OF_THE = re.compile(
    r"^(?:the\s+|o\s+)?(?:end|fim|final)\s+(?:of\s+the|do|da)\s+"
    r"(?P<unit>week|month|year|semana|mes|ano)$"
)


class MemoryOptionError(ValueError):
    """An option that cannot be used; ``reason`` names the text to show (a key of
    ``akira_bot.commands.texts``), ``values`` fill it."""

    def __init__(self, reason: str, **values: object) -> None:
        super().__init__(reason)
        self.reason = reason
        self.values = values


@dataclass(frozen=True, slots=True)
class MemoryOptions:
    priority: Priority | None = None
    expires_at: datetime | None = None
    clear_expiry: bool = False

    @property
    def given(self) -> bool:
        return self.priority is not None or self.expires_at is not None or self.clear_expiry


def parse_priority_word(word: str) -> Priority:
    priority = PRIORITY_WORDS.get(fold(word))
    if priority is None:
        raise MemoryOptionError("remember_bad_priority", word=word[:32])
    return priority


def split_options(text: str, at: datetime) -> tuple[str, MemoryOptions]:
    """``text`` without its priority and expiry, and the options found. Trailing
    ``#tags`` stay in the text (the caller reads them), the clauses before them are
    still found: ``trip: Porto until 2026-12-31 #travel``."""
    tags_at = _trailing_tags_start(text)
    body, tags = text[:tags_at], text[tags_at:]
    priority: Priority | None = None
    expires_at: datetime | None = None
    clear = False
    lead = _LEADING_PRIORITY.match(body)
    if lead:
        priority = parse_priority_word(lead.group("word"))
        body = body[lead.end() :]
    # The end of the text: a priority and an expiry, in either order.
    for _ in range(2):
        trail = _TRAILING_PRIORITY.search(body)
        if trail and priority is None:
            priority = parse_priority_word(trail.group("word"))
            body = body[: trail.start()]
            continue
        if expires_at is None and not clear:
            if _NO_EXPIRY.search(body):
                clear = True
                body = _NO_EXPIRY.sub("", body)
                continue
            found = _trailing_expiry(body, at)
            if found is not None:
                body, expires_at = found
                continue
        break
    text = (body.rstrip() + " " + tags.strip()).strip() if tags.strip() else body.strip()
    return text, MemoryOptions(priority, expires_at, clear)


def _trailing_tags_start(text: str) -> int:
    match = re.search(r"(?:\s+#[^\W_][\w\-]*)+\s*$", text, re.UNICODE)
    return match.start() if match else len(text)


def _trailing_expiry(body: str, at: datetime) -> tuple[str, datetime] | None:
    """The body before an expiry clause that ends it, and the expiry; None when the
    body does not end with one (or ends with a full stop: a sentence, kept whole)."""
    if body.rstrip().endswith("."):
        return None
    for match in reversed(list(_CLAUSE_WORD.finditer(body))):
        word = match.group("word").lower()
        tail = body[match.end() :].strip()
        if word in ("for", "por", "durante"):
            relative = _RELATIVE.match(tail)
            if relative is None:
                continue
            return body[: match.start()], _after(relative, at)
        when = parse_until(tail, at)
        if when is None:
            if word != "ate" and _looks_like_a_date(tail):
                raise MemoryOptionError("remember_bad_date", text=tail[:40])
            continue
        if when <= at:
            if word == "ate":
                continue  # "I ate yesterday": English, not an expiry
            raise MemoryOptionError("remember_past_date", date=tail[:40])
        _check_horizon(when, at)
        return body[: match.start()], when
    return None


def _looks_like_a_date(tail: str) -> bool:
    """A short tail with digits after "until": a date typed wrong, not a sentence."""
    return len(tail.split()) <= 3 and any(c.isdigit() for c in tail)


def _after(relative: re.Match[str], at: datetime) -> datetime:
    n = int(relative.group("n"))
    unit = fold(relative.group("unit"))
    if n == 0:
        raise MemoryOptionError("remember_bad_date", text=relative.group(0)[:40])
    if unit.startswith("h"):
        step = relativedelta(hours=n)
    elif unit.startswith("d"):
        step = relativedelta(days=n)
    elif unit.startswith(("w", "s")):
        step = relativedelta(weeks=n)
    elif unit.startswith("m"):
        step = relativedelta(months=n)
    else:
        step = relativedelta(years=n)
    if n > 366 * MAX_YEARS_AHEAD:
        raise MemoryOptionError("remember_too_far", years=MAX_YEARS_AHEAD)
    try:
        when = at + step
    except (OverflowError, ValueError):
        raise MemoryOptionError("remember_too_far", years=MAX_YEARS_AHEAD) from None
    _check_horizon(when, at)
    return when


def _check_horizon(when: datetime, at: datetime) -> None:
    if when > at + timedelta(days=366 * MAX_YEARS_AHEAD):
        raise MemoryOptionError("remember_too_far", years=MAX_YEARS_AHEAD)


def _day_after(day: date, at: datetime) -> datetime:
    """An expiry "until <day>" keeps the memory through that whole day."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=at.tzinfo)


def parse_until(text: str, at: datetime) -> datetime | None:
    """When a memory kept "until ``text``" expires (the end of the named day, week or
    month), or None when ``text`` is not a date. Numeric dates are day first
    (31/12/2026), month first only when the day-first reading is impossible
    (12/31/2026); ISO dates (2026-12-31) always read the same."""
    text = text.strip()
    if len(text) > 60:
        return None
    iso = _ISO.match(text)
    if iso:
        try:
            return _day_after(date(int(iso["y"]), int(iso["m"]), int(iso["d"])), at)
        except (ValueError, OverflowError):
            raise MemoryOptionError("remember_bad_date", text=text[:40]) from None
    numeric = _NUMERIC.match(text)
    if numeric:
        return _numeric_date(numeric, at)
    end_of = _END_OF_THE.match(fold(text).lower())
    if end_of:
        text = f"this {end_of['unit']}"
    found = spans(text, at, past=False)
    if len(found) != 1:
        return None
    rest = fold(text).replace(found[0].text, " ", 1)
    if any(word not in _FILLER for word in re.findall(r"\w+", rest)):
        return None
    return found[0].end


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _numeric_date(match: re.Match[str], at: datetime) -> datetime:
    a, b = int(match["a"]), int(match["b"])
    raw_year = match["y"]
    year = at.year if raw_year is None else int(raw_year) + (2000 if len(raw_year) == 2 else 0)
    for day, month in ((a, b), (b, a)):
        try:
            found = date(year, month, day)
        except ValueError:
            continue
        if raw_year is None and found < at.date():
            # "até 10/01" in December: next January (a 29/02 goes to the next leap year).
            later = next(
                (d for y in range(year + 1, year + 9) if (d := _valid(y, month, day))), None
            )
            if later is None:
                continue
            found = later
        return _day_after(found, at)
    raise MemoryOptionError("remember_bad_date", text=match.group(0)[:40])
