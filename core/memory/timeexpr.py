"""Dates named in a message, resolved against the message's own time (never the clock).

>>> spans("quanto eu corri semana passada?", at)       # the calendar week before ``at``
>>> spans("tenho entrevista amanhã", at)                # the day after ``at``, future=True

Portuguese and English: today/yesterday/tomorrow, weekdays (with "last"/"next", "passado"/
"que vem"; a bare weekday is the next one in a statement, the last one in a question about
the past; a plural one, "on Mondays", or one after "every" / "toda" is a habit, not a
date), last/this/next week, month and year (a bare "week" measures time, it names none),
weekend, "N days ago", month names,
"dia 12", "15 de abril", "April 15", "12/04", and the holidays people date things by
(Christmas, New Year, Carnival and Easter, whose dates move with Easter). Each found
expression becomes a :class:`Span`; ``future`` says it lies after the message (an announced
event).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from dateutil.easter import easter

from core.embeddings.hashing import fold
from core.memory.tags import STOP_WORDS

DAY = timedelta(days=1)

_WEEKDAYS = {
    "segunda": 0,
    "terca": 1,
    "quarta": 2,
    "quinta": 3,
    "sexta": 4,
    "sabado": 5,
    "domingo": 6,
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
}
_MONTHS = {
    "janeiro": 1,
    "fevereiro": 2,
    "marco": 3,
    "abril": 4,
    "maio": 5,
    "junho": 6,
    "julho": 7,
    "agosto": 8,
    "setembro": 9,
    "outubro": 10,
    "novembro": 11,
    "dezembro": 12,
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
}
# Months that are also common words ("may", "march") count only after a date word.
_AMBIGUOUS_MONTHS = {"may", "march"}

_LAST = r"(?:passad[oa]|ultim[oa]|last|past|previous)"
_NEXT = r"(?:que vem|proxim[oa]|seguinte|next|coming)"
_WD = "|".join(_WEEKDAYS)
_MO = "|".join(_MONTHS)

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(rx))
    for name, rx in [
        ("anteontem", r"\b(?:anteontem|day before yesterday)\b"),
        ("yesterday", r"\b(?:ontem|yesterday|last night)\b"),
        ("tomorrow", r"\b(?:amanha|tomorrow)\b"),
        ("today", r"\b(?:hoje|today|tonight|this morning|esta manha|essa manha)\b"),
        (
            "weekday",
            rf"\b(?:(?P<every>todas?\s+(?:as\s+)?|every\s+|each\s+)"
            rf"|(?P<pre>{_LAST}|{_NEXT}|this|essa|esta|nesta|nessa)\s+)?"
            rf"(?P<wd>{_WD})(?P<plural>s)?(?:-feiras?|\s+feiras?)?"
            rf"(?:\s+(?P<post>{_LAST}|{_NEXT}))?\b",
        ),
        (
            "weekend",
            rf"\b(?:(?P<pre>{_LAST}|{_NEXT}|this)\s+)?(?:fim de semana|final de semana|"
            rf"weekend|fds)(?:\s+(?P<post>{_LAST}|{_NEXT}))?\b",
        ),
        (
            "week",
            rf"\b(?:(?P<pre>{_LAST}|{_NEXT}|this|essa|esta|nesta|nessa)\s+)?(?:semana|week)"
            rf"(?:\s+(?P<post>{_LAST}|{_NEXT}))?\b",
        ),
        (
            "month",
            rf"\b(?:(?P<pre>{_LAST}|{_NEXT}|this|esse|este|nesse|neste)\s+)?(?:mes|month)"
            rf"(?:\s+(?P<post>{_LAST}|{_NEXT}))?\b",
        ),
        (
            "year",
            rf"\b(?:(?P<pre>{_LAST}|{_NEXT}|this|esse|este|nesse|neste)\s+)?(?:ano|year)"
            rf"(?:\s+(?P<post>{_LAST}|{_NEXT}))?\b",
        ),
        (
            "ago",
            r"\b(?:ha|faz)\s+(?P<n>\d+|um|uma|dois|duas|tres)\s+(?P<unit>dias?|semanas?|mes|meses)"
            r"\b|\b(?P<n2>\d+|a|one|two|three)\s+(?P<unit2>days?|weeks?|months?)\s+ago\b",
        ),
        ("dm", rf"\b(?P<d>\d{{1,2}})\s+(?:de\s+)?(?P<m>{_MO})\b"),
        ("md", rf"\b(?P<m>{_MO})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b"),
        ("numeric", r"\b(?P<d>\d{1,2})/(?P<m>\d{1,2})(?:/(?P<y>\d{2,4}))?\b"),
        ("dayof", r"\b(?:dia|on the)\s+(?P<d>\d{1,2})\b"),
        ("monthname", rf"\b(?P<pre>em|in|de|of|no|na|since|desde|until|ate)?\s*(?P<m>{_MO})\b"),
        ("christmas", r"\b(?:natal|christmas|xmas)\b"),
        ("newyear", r"\b(?:ano novo|reveillon|new year'?s?(?: eve)?)\b"),
        ("carnival", r"\b(?:carnaval|carnival)\b"),
        ("easter", r"\b(?:pascoa|easter)\b"),
    ]
]
# Portuguese weekday names that are also ordinals ("segunda fase", "quinta série"): an
# ordinal is followed by its noun; a day ends the clause or is followed by a function
# word ("na segunda eu volto", "sexta de manhã", "quinta que vem").
_ORDINAL_WEEKDAYS = {"segunda", "terca", "quarta", "quinta", "sexta"}
_NEXT_WORD = re.compile(r"\s+([a-z]+)")


def _is_weekday(m: re.Match[str]) -> bool:
    if "feira" in m.group(0) or _direction(m) != 0:
        return True
    after = _NEXT_WORD.match(m.string, m.end())
    return after is None or after.group(1) in STOP_WORDS


_SMALL = {
    "um": 1,
    "uma": 1,
    "a": 1,
    "one": 1,
    "dois": 2,
    "duas": 2,
    "two": 2,
    "tres": 3,
    "three": 3,
}


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of time a message names: [start, end), and whether it lies after it."""

    start: datetime
    end: datetime
    future: bool
    text: str

    def contains(self, moment: datetime, slack: timedelta = timedelta(0)) -> bool:
        return self.start - slack <= moment < self.end + slack


def _day(d: date, at: datetime) -> datetime:
    return datetime.combine(d, time(0), tzinfo=at.tzinfo)


def _span(start: date, days: int, at: datetime, text: str) -> Span:
    begin = _day(start, at)
    return Span(begin, begin + days * DAY, begin > at, text)


def _direction(match: re.Match[str]) -> int:
    """-1 "last", +1 "next", 0 "this" / bare."""
    words = " ".join(filter(None, (match.groupdict().get("pre"), match.groupdict().get("post"))))
    if re.search(_LAST, words):
        return -1
    if re.search(_NEXT, words):
        return 1
    return 0


def _month_span(year: int, month: int, at: datetime, text: str) -> Span:
    start = date(year, month, 1)
    end = date(year + (month == 12), month % 12 + 1, 1)
    return _span(start, (end - start).days, at, text)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def spans(text: str, at: datetime, *, past: bool | None = None) -> list[Span]:
    """The times ``text`` names, resolved against ``at`` (the message's own time).

    ``past`` settles bare names ("sábado", "outubro"): True takes the latest one not after
    ``at`` (a question about what happened), False the next one (a statement of plans);
    None guesses from the text (a question mark reads as asking about the past)."""
    folded = fold(text).lower()
    if past is None:
        past = "?" in text
    today = at.date()
    found: list[Span] = []
    taken: list[tuple[int, int]] = []

    def free(m: re.Match[str]) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    for name, pattern in _PATTERNS:
        for m in pattern.finditer(folded):
            if not free(m):
                continue
            span = _resolve(name, m, at, today, past)
            if span is not None:
                found.append(span)
                taken.append((m.start(), m.end()))
    return found


def _resolve(name: str, m: re.Match[str], at: datetime, today: date, past: bool) -> Span | None:
    text = m.group(0)
    if name == "today":
        return _span(today, 1, at, text)
    if name == "yesterday":
        return _span(today - DAY, 1, at, text)
    if name == "anteontem":
        return _span(today - 2 * DAY, 1, at, text)
    if name == "tomorrow":
        return _span(today + DAY, 1, at, text)
    direction = _direction(m) if name in ("weekday", "weekend", "week", "month", "year") else 0
    if name in ("week", "month", "year") and not (m.group("pre") or m.group("post")):
        # A bare unit measures time, it does not place it: "this takes a week", "once a
        # month", "o ano todo". Only "last/this/next week" (passada, que vem, essa) is one.
        return None
    if name == "weekday":
        if m.group("wd") in _ORDINAL_WEEKDAYS and not _is_weekday(m):
            return None
        if m.group("plural") or m.group("every"):
            return None  # "on Mondays", "às segundas", "toda quarta": a habit, not a day
        wd = _WEEKDAYS[m.group("wd")]
        back = (today.weekday() - wd) % 7 or 7  # the last one strictly before today
        ahead = (wd - today.weekday()) % 7 or 7
        if direction < 0 or (direction == 0 and past):
            return _span(today - back * DAY, 1, at, text)
        return _span(today + ahead * DAY, 1, at, text)
    if name == "weekend":
        saturday_ahead = (5 - today.weekday()) % 7
        if direction < 0 or (direction == 0 and past and today.weekday() < 5):
            last_saturday = today - ((today.weekday() - 5) % 7 or 7) * DAY
            if today.weekday() == 6 and direction < 0:
                last_saturday -= 7 * DAY
            return _span(last_saturday, 2, at, text)
        start = today + (saturday_ahead + (7 if direction > 0 and saturday_ahead < 2 else 0)) * DAY
        if today.weekday() >= 5 and direction == 0:
            start = today - (today.weekday() - 5) * DAY
        return _span(start, 2, at, text)
    if name == "week":
        monday = today - today.weekday() * DAY
        return _span(monday + 7 * direction * DAY, 7, at, text)
    if name == "month":
        index = today.year * 12 + today.month - 1 + direction
        return _month_span(index // 12, index % 12 + 1, at, text)
    if name == "year":
        start = date(today.year + direction, 1, 1)
        return _span(start, (date(start.year + 1, 1, 1) - start).days, at, text)
    if name == "ago":
        raw = m.group("n") or m.group("n2")
        unit = m.group("unit") or m.group("unit2") or ""
        n = int(raw) if raw.isdigit() else _SMALL.get(raw, 1)
        days = n * (30 if unit.startswith("m") else 7 if unit[0] in "sw" else 1)
        return _span(today - days * DAY, max(1, days // 7), at, text)
    if name in ("dm", "md", "numeric", "dayof"):
        day = int(m.group("d"))
        if name == "dayof":
            month, year = today.month, today.year
        else:
            raw = m.group("m")
            month = int(raw) if raw.isdigit() else _MONTHS[raw]
            year_raw = m.groupdict().get("y")
            year = today.year
            if year_raw:
                year = int(year_raw) + (2000 if len(year_raw) == 2 else 0)
        found = _safe_date(year, month, day)
        if found is None:
            return None
        if not (name == "numeric" and m.groupdict().get("y")):
            # Without a year: the nearest one on the side the sentence looks at.
            if past and found > today:
                found = _safe_date(year - 1, month, day) if name != "dayof" else None
                if found is None and name == "dayof":
                    prev = today.replace(day=1) - DAY
                    found = _safe_date(prev.year, prev.month, day)
            elif not past and found < today - 7 * DAY:
                if name == "dayof":
                    nxt = (today.replace(day=28) + 4 * DAY).replace(day=1)
                    found = _safe_date(nxt.year, nxt.month, day)
                else:
                    found = _safe_date(year + 1, month, day)
            if found is None:
                return None
        return _span(found, 1, at, text)
    if name == "monthname":
        raw = m.group("m")
        if raw in _AMBIGUOUS_MONTHS and not m.group("pre"):
            return None
        month = _MONTHS[raw]
        year = today.year
        if past and month > today.month:
            year -= 1
        elif not past and month < today.month:
            year += 1
        return _month_span(year, month, at, text)
    # Holidays: the nearest one on the side the sentence looks at.
    years = (today.year + 1, today.year, today.year - 1)
    for year in years if past else reversed(years):
        span = _holiday(name, year, at, text)
        if span is None:
            return None
        if (past and span.start.date() <= today) or (not past and span.end.date() > today):
            return span
    return None


def _holiday(name: str, year: int, at: datetime, text: str) -> Span | None:
    if name == "christmas":
        return _span(date(year, 12, 24), 3, at, text)
    if name == "newyear":
        return _span(date(year, 12, 31), 2, at, text)
    if name == "carnival":
        return _span(easter(year) - 50 * DAY, 6, at, text)  # Saturday to Ash Wednesday
    if name == "easter":
        return _span(easter(year) - 3 * DAY, 4, at, text)
    return None


# -- the time a question asks for ------------------------------------------------------
#
# "em quais dias da semana são minhas aulas?", "remind me which day my lessons are on?",
# "que horas é o voo?", "em que mês é o casamento?": the interrogative phrase names the
# unit of the answer, not the topic. A line that answers names a time of that unit
# ("aula toda terça e quinta", "the class is on Saturdays"); :func:`asked_unit` reads the
# unit, :func:`names_unit` whether a line names one. Closed classes of grammar (the
# interrogatives and the calendar's units), as the rest of this module.
_ASKED: list[tuple[str, re.Pattern[str]]] = [
    (unit, re.compile(rx))
    for unit, rx in [
        (
            "day",
            r"\b(?:(?:em|n?os?|n?as?)\s+)?(?:que|qual|quais)\s+dias?\b"
            r"|\b(?:which|what)\s+days?\b",
        ),
        ("clock", r"\b(?:a\s+)?que\s+horas?\b|\bqual\s+(?:o\s+)?hor[aá]rio\b|\bwhat\s+time\b"),
        ("month", r"\b(?:em\s+)?(?:que|qual)\s+mes\b|\b(?:which|what)\s+month\b"),
        ("year", r"\b(?:em\s+)?(?:que|qual)\s+ano\b|\b(?:which|what)\s+year\b"),
    ]
]
_NAMES_UNIT: dict[str, re.Pattern[str]] = {
    # A weekday ("terça", "às quintas", "Saturdays"; not the abbreviations, which are
    # words too: "vai ter", "wed") or a day of the month ("dia 12", "15/04", "April 15").
    "day": re.compile(
        rf"\b(?:{_WD})s?\b"
        rf"|\bdia\s+\d{{1,2}}\b|\b\d{{1,2}}/\d{{1,2}}\b|\b\d{{1,2}}\s+(?:de\s+)?(?:{_MO})\b"
        rf"|\b(?:{_MO})\s+\d{{1,2}}\b"
    ),
    # A time of day: "às 7", "7h", "19:30", "7pm", "meio-dia", "noon".
    "clock": re.compile(
        r"\b\d{1,2}(?::\d{2}|h\d{0,2}|\s?(?:am|pm))\b|\b(?:as|at)\s+\d{1,2}\b"
        r"|\b(?:meio-dia|meio dia|meia-noite|meia noite|noon|midnight)\b"
    ),
    # A month ("em outubro", "in May": "may" and "march" only after a date word, as
    # above: "I may go") or a numeric date.
    "month": re.compile(
        rf"\b(?:{'|'.join(m for m in _MONTHS if m not in _AMBIGUOUS_MONTHS)})\b"
        r"|\b(?:in|of|since|until|by|early|late)\s+(?:may|march)\b|\b\d{1,2}/\d{1,2}\b"
    ),
    "year": re.compile(r"\b(?:19|20)\d{2}\b"),
}


def asked_unit(text: str) -> str | None:
    """The unit of time a question asks for ("day", "clock", "month", "year"), or None
    (a statement, or a question about something else). "When"/"quando" names no unit
    (and "when I ..." is often no question of time at all)."""
    if "?" not in text:
        return None
    folded = fold(text).lower()
    for unit, pattern in _ASKED:
        if pattern.search(folded):
            return unit
    return None


def names_unit(text: str, unit: str) -> bool:
    """Whether ``text`` names a time of ``unit`` (see :func:`asked_unit`)."""
    pattern = _NAMES_UNIT.get(unit)
    return pattern is not None and pattern.search(fold(text).lower()) is not None
