"""Entities a message names: the people, pets, places and projects of a person's life.

A multi-hop question joins facts told apart ("em que mês é o casamento da minha irmã?"
needs "a Júlia (minha irmã) ..." and "a Júlia vai casar em outubro"); what joins them is
neither their words nor their meaning but who they are about. Entities are read from the
text at write time (no model), stored as postings (owner, entity, node) and linked:
a message naming an entity gets a ``same_entity`` edge to the latest earlier messages
naming it, so the graph walk goes from one fact to the other through the entity.

Two kinds, both as folded keys (lowercase, no accents, as tags are):

- **names**: capitalised words (runs of them, "Rio de Janeiro", "New York") that are not
  function words, days or months. A capital at the start of a sentence says nothing
  ("Adotei", "Wow"), so a sentence-initial word is only *tentative*: it counts when the
  person has named it elsewhere (the caller checks the postings). "Name:" opening a
  message (a speaker's label, or someone addressed) is a name. All-caps words of two or
  more letters are names ("UFSC", "LGBTQ") unless the whole message shouts.
- **relations**: a possessive and a kinship, pet or role noun ("minha irmã", "my sister",
  "meu chefe", "our dog"), as ``rel:<canonical English noun>`` so Portuguese and English
  meet. This is a closed class (the people and animals of a household and work), as
  pronouns are; it is not a topic list. A role is also given by the statement that
  makes it: the end of a relationship ("terminei com o Leo", "we broke up", "me
  separei") makes someone the person's ex, so such a line names ``rel:ex`` and "sinto
  falta do meu ex" reaches it though the two share no word (a closed class of the
  phrasings of breaking up, as the role nouns are).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from core.embeddings.hashing import fold
from core.memory.tags import STOP_WORDS
from core.memory.timeexpr import _MONTHS, _WEEKDAYS

RELATION_PREFIX = "rel:"
MAX_ENTITIES = 8  # a message naming more is a list; the first ones are kept

# Kinship, pet and role nouns after a possessive, folded, to one canonical key.
_RELATIONS: dict[str, str] = {}
for _canonical, _words in {
    "sister": "irma irmas sister sisters sis",
    "brother": "irmao irmaos brother brothers bro",
    "mother": "mae mamae mom mum mother mama",
    "father": "pai papai dad father papa",
    "wife": "esposa wife",
    "husband": "marido esposo husband",
    "partner": "namorado namorada noivo noiva boyfriend girlfriend partner fiance fiancee",
    "child": "filho filha filhos filhas son daughter sons daughters kid kids children",
    "grandparent": "avo avos vovo grandma grandmother grandpa grandfather granny grandparents",
    "cousin": "primo prima primos primas cousin cousins",
    "aunt": "tia aunt",
    "uncle": "tio uncle",
    "boss": "chefe gerente boss manager supervisor",
    "teacher": "professor professora teacher tutor",
    "coach": "treinador treinadora coach trainer",
    "therapist": "terapeuta psicologo psicologa therapist psychologist",
    "doctor": "medico medica doctor",
    "roommate": "roommate flatmate housemate",
    "dog": "cachorro cachorra cachorrinho cachorrinha cao dog doggo puppy",
    "cat": "gato gata gatinho gatinha cat kitten",
    "pet": "pet pets",
    "ex": "ex exes",  # "meu ex", "my ex-wife" ("ex" before the hyphen)
}.items():
    for _word in _words.split():
        _RELATIONS[_word] = _canonical

_POSSESSIVE = re.compile(
    r"\b(?:meu|minha|meus|minhas|nosso|nossa|nossos|nossas)\s+(\w+)"
    # English allows one adjective in between: "my little sister", "my old boss".
    r"|\b(?:my|our)\s+(?:(\w+)\s+)?(\w+)",
)
# The end of a relationship told in the first person (see the module docstring): "terminei
# com o Leo" / "com ele" (a person, not "terminei com o relatório": a name or a pronoun),
# "ele terminou comigo", "terminamos", "terminei o namoro", "me separei", "nos
# divorciamos", "levei um fora", "we broke up", "she dumped me", "got divorced".
_BREAKUP = re.compile(
    r"(?i:\btermin(?:ei|amos|ou|aram)\s+com\s+(?:(?:o|a)\s+)?)(?:[A-ZÀ-Þ]\w+|(?i:el[ea])\b)"
    r"|(?i:\btermin(?:ou|aram)\s+comigo\b|\bterminamos\b"
    r"|\btermin(?:ei|amos|ou)\s+(?:o|nosso|meu)\s+(?:namoro|noivado|casamento)\b"
    r"|\b(?:me|nos)\s+(?:separ|divorci)(?:ei|amos)\b|\b(?:levei|tomei)\s+(?:um\s+)?(?:p[ée]|fora)\b"
    r"|\b(?:broke|broken|breaking)\s+up\s+with\b|\b(?:we|they|i|he|she)(?:'ve)?\s+(?:just\s+)?"
    r"(?:broke|have\s+broken|split)\s+up\b(?!\s+(?:the|a|an|this|that|it)\b)|\bgot\s+divorced\b|\bdumped\s+me\b)"
)
_TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_SPEAKER = re.compile(r"^\s*([^\W\d_][^\W\d_'’ -]*(?: [^\W\d_][^\W\d_'’-]*)?):\s")
_SENTENCE_END = re.compile(r"[.!?\n]")
# Lowercase words allowed inside a name: "Rio de Janeiro", "Bank of America".
_CONNECTORS = frozenset({"de", "da", "do", "dos", "das", "of", "van", "von", "del", "la"})
# Weekday abbreviations ("last Fri", "na sex") are dates too.
_ABBREVIATIONS = frozenset(
    "mon tue tues wed thu thur thurs fri sat sun seg ter qua qui sex sab dom".split()
)
_NOT_NAMES = STOP_WORDS | frozenset(_WEEKDAYS) | frozenset(_MONTHS) | _ABBREVIATIONS
MAX_NAME_WORDS = 3


@dataclass(frozen=True, slots=True)
class Mentions:
    """What a text names. ``tentative``: capitalised words at the start of a sentence,
    names only if the person has named them elsewhere."""

    names: tuple[str, ...] = ()
    tentative: tuple[str, ...] = ()
    relations: tuple[str, ...] = ()

    @property
    def definite(self) -> tuple[str, ...]:
        return (*self.names, *self.relations)

    def __bool__(self) -> bool:
        return bool(self.names or self.tentative or self.relations)


def _is_capitalised(token: str) -> bool:
    return token[0].isupper() and not (len(token) == 1 and token.isupper())


_CONTRACTION = re.compile(r"^(\w+)['’](?:ll|ve|re|d|m|t)$", re.IGNORECASE)


def _excluded(word: str, words: frozenset[str]) -> bool:
    """In ``words`` folded, without its apostrophes ("Don't" -> "dont"), or as the
    first word of a contraction ("I'll" -> "i")."""
    contraction = _CONTRACTION.match(word)
    return fold(word).replace("'", "").replace("’", "") in words or (
        contraction is not None and fold(contraction.group(1)) in words
    )


def _key(words: list[str]) -> str | None:
    key = fold(" ".join(words))
    key = re.sub(r"['’]s$", "", key)
    if key in _NOT_NAMES or len(key) < 2:
        return None
    return key


def speaker(text: str) -> str | None:
    """Who says ``text`` when it is a transcript line ("Caroline: ..."): the label's
    entity key (as :func:`extract_entities` gives it), else None. A label is
    capitalised ("finally done: ..." is prose)."""
    found = _SPEAKER.match(text)
    if found is None or not found.group(1)[0].isupper():
        return None
    return _key(found.group(1).split())


@functools.lru_cache(maxsize=16_384)
def extract_entities(text: str) -> Mentions:
    """The names and relations ``text`` mentions (see the module docstring)."""
    names: list[str] = []
    tentative: list[str] = []
    start = 0
    speaker = _SPEAKER.match(text)
    if speaker is not None:
        key = _key(speaker.group(1).split())
        if key is not None:
            names.append(key)
        start = speaker.end()
    letters = [c for c in text[start:] if c.isalpha()]
    shouting = len(letters) >= 8 and sum(c.isupper() for c in letters) > 0.6 * len(letters)
    run: list[str] = []
    run_initial = False
    previous_end = start
    pending: list[str] = []  # connectors seen inside the current run

    def close() -> None:
        nonlocal run
        if run:
            key = _key(run)
            if key is not None:
                (tentative if run_initial and len(run) == 1 else names).append(key)
        run = []

    if not shouting:
        for match in _TOKEN.finditer(text, start):
            token = match.group(0)
            gap = text[previous_end : match.start()]
            initial = previous_end == start or bool(_SENTENCE_END.search(gap))
            previous_end = match.end()
            word = re.sub(r"['’]s$", "", token)
            # Inside a name a month is a word of it ("Rio de Janeiro"); alone it is a date.
            joined = bool(run) and not run_initial and gap.strip() == ""
            named = _is_capitalised(word) and not _excluded(
                word, STOP_WORDS if joined else _NOT_NAMES
            )
            if named and not initial:
                if run_initial and run:
                    # "Wow Mel", "Congrats Caroline": the sentence's first word stays
                    # tentative on its own; the name starts here.
                    close()
                    pending = []
                    run, run_initial = [word], False
                elif run and not pending and len(run) < MAX_NAME_WORDS and gap.strip() == "":
                    run.append(word)
                elif run and pending and gap.strip() == "":
                    run.extend([*pending, word])
                    pending = []
                else:
                    close()
                    pending = []
                    run, run_initial = [word], False
                if word != token:  # "Melanie's": the name ends here
                    close()
            elif named and initial:
                close()
                pending = []
                run, run_initial = [word], True
                if word != token:
                    close()
            elif run and token.lower() in _CONNECTORS and gap.strip() == "" and not pending:
                pending = [token]
            else:
                close()
                pending = []
        close()
    relations = []
    for match in _POSSESSIVE.finditer(fold(text)):
        pt, adjective, en = match.groups()
        noun = pt or en
        relation = _RELATIONS.get(noun or "")
        if relation is None and adjective is not None:  # "my sister Ana": no adjective
            relation = _RELATIONS.get(adjective)
        if relation is not None:
            relations.append(RELATION_PREFIX + relation)
    if _BREAKUP.search(text):
        relations.append(RELATION_PREFIX + "ex")
    unique = list(dict.fromkeys(names))[:MAX_ENTITIES]
    return Mentions(
        names=tuple(unique),
        tentative=tuple(t for t in dict.fromkeys(tentative) if t not in unique),
        relations=tuple(dict.fromkeys(relations)),
    )


def without_names(text: str, keys: Iterable[str]) -> str:
    """``text`` with the names whose entity keys are ``keys`` taken out (a possessive
    "'s" with them): "What has Melanie painted?" -> "What has painted?". Names are
    matched as :func:`extract_entities` keys them (folded, whole words, a run of words
    for a name of several)."""
    wanted = [key.split() for key in keys if key and not key.startswith(RELATION_PREFIX)]
    if not wanted:
        return text
    tokens = list(_TOKEN.finditer(text))
    folded = [fold(re.sub(r"['’]s$", "", t.group(0))) for t in tokens]
    cut: list[tuple[int, int]] = []
    n = 0
    while n < len(tokens):
        for words in wanted:
            if folded[n : n + len(words)] == words:
                cut.append((tokens[n].start(), tokens[n + len(words) - 1].end()))
                n += len(words)
                break
        else:
            n += 1
    if not cut:
        return text
    kept, last = [], 0
    for start, end in cut:
        kept.append(text[last:start])
        last = end
    kept.append(text[last:])
    joined = re.sub(r"\s+([,.;:!?])", r"\1", "".join(kept))
    return re.sub(r"\s{2,}", " ", joined).strip()
