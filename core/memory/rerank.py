"""A learned order for what conversational recall found: the search's candidates re-ranked
by a linear model over what recall already knows of each of them.

The search (core.memory.search) scores a line by a fixed mix of its lists, its thread and
self-description priors, the walk, the named times and recency; the shares of that mix
were set by hand on the dev chats, and on people the project never saw the line a message
needs is nearly always among the search's first 20 but often not its first 5
(docs/recall.md, session 16). The reranker weighs the same signals again, with weights
learned from the labelled probes of many people: the search's score and rank, each encoder's closeness of the line to the message
(against the other candidates), its thread and self-description priors, how much it
announced an event, its age, its length, whether it is a reply or a question, whether
the walk reached it, whether it was told for about the time of an event the search put
first (core.memory.query.date_bridges), the opens head's reading of it (a matter a
later message may take up, core.memory.heads), and a few pairings with what the message
is (a request for a suggestion, news of an outcome, a question).

The model is listwise (a softmax over one message's candidates, the lines it needs being
the target), fitted by Newton's method in ``python -m training.recall.rerank``; its
weights ship in ``weights/recall_rerank.npz`` with a JSON recipe naming the two encoders
whose closeness it weighs, and load for that pair only (closeness means something else
under another model, as for :mod:`core.memory.heads`). Without them recall keeps the
search's order.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from core.memory.base import RecalledNode
from core.memory.heads import WEIGHTS_DIR, recipe_path
from core.memory.tags import content_words, is_question
from core.storage.records import NodeType

log = logging.getLogger(__name__)

DEFAULT_RERANKER = WEIGHTS_DIR / "recall_rerank.npz"
_DAY_S = 86_400.0

# The features, in the order of the weights. Closeness is centred on the candidates'
# mean: how much closer than the rest a line is, not the encoder's absolute scale.
FEATURES = (
    "score",  # the search's score over the best candidate's
    "log_score",
    "rank",  # log(1 + the search's rank)
    "closeness",  # first encoder's cosine to the message, centred
    "second_closeness",  # second encoder's, centred
    "thread",  # the thread prior the line got (core.memory.query.thread_priors)
    "self",  # the self-description prior (core.memory.query.self_priors)
    "eventness",  # an announced event that came due, a reported happening
    "age",  # log(1 + days before the message)
    "reply",  # the bot's line
    "question",  # the person's question
    "length",  # log(1 + content words)
    "walked",  # reached over an edge or a bridge, not found directly
    "closest",  # the candidates' best by the first encoder
    "second_closest",  # ... by the second
    "asks_x_closeness",  # the message asks for a suggestion (self-descriptions: "self")
    "asks_x_second_closeness",
    "news_x_eventness",  # the message tells or asks for an outcome: announced events
    "question_x_question",  # a question recalled for a question
    "near_date",  # told for about the time of an event the search put first
    "question_x_near_date",
    "opens",  # the opens head's reading of the line (core.memory.heads)
    "news_x_opens",
)


@dataclass(frozen=True, slots=True)
class MessageSignals:
    """What recall read of the message (core.memory.query.QueryPlan)."""

    at: datetime
    asks: bool  # asks for a suggestion (the grammar or the learned head)
    news: bool  # tells or asks for an outcome
    question: bool


@dataclass(frozen=True, slots=True)
class Candidate:
    """A line the search found, with what recall knows of it."""

    found: RecalledNode
    closeness: float  # first encoder's cosine to the message (0 when unknown)
    second_closeness: float  # the second encoder's
    thread: float
    self_prior: float
    eventness: float
    near_date: float = 0.0  # core.memory.query.date_bridges, from the search's first lines
    opens: float = 0.0  # the opens head's probability (0 without it)


def feature_matrix(message: MessageSignals, candidates: Sequence[Candidate]) -> np.ndarray:
    """One row of :data:`FEATURES` a candidate, in the search's order."""
    if not candidates:
        return np.zeros((0, len(FEATURES)), dtype=np.float64)
    top = max(c.found.score for c in candidates) or 1.0
    first = np.array([c.closeness for c in candidates])
    second = np.array([c.second_closeness for c in candidates])
    first_mean, second_mean = float(first.mean()), float(second.mean())
    first_best, second_best = float(first.max()), float(second.max())
    asks, news, asked = float(message.asks), float(message.news), float(message.question)
    rows = []
    for rank, c in enumerate(candidates):
        node = c.found.node
        share = max(c.found.score / top, 1e-3)
        near = c.closeness - first_mean
        second_near = c.second_closeness - second_mean
        question = float(node.type is NodeType.USER_MESSAGE and is_question(node.content))
        age = max((message.at - node.timestamp).total_seconds(), 0.0) / _DAY_S
        rows.append(
            (
                share,
                math.log(share),
                math.log1p(rank),
                near,
                second_near,
                c.thread,
                c.self_prior,
                c.eventness,
                math.log1p(age),
                float(node.type is NodeType.AKIRA_RESPONSE),
                question,
                math.log1p(len(content_words(node.content))),
                float(c.found.depth > 0),
                float(c.closeness == first_best),
                float(c.second_closeness == second_best),
                asks * near,
                asks * second_near,
                news * c.eventness,
                asked * question,
                c.near_date,
                asked * c.near_date,
                c.opens,
                news * c.opens,
            )
        )
    return np.array(rows, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Reranker:
    """A linear score over :func:`feature_matrix`; the encoders its closeness reads (the
    memory's first, ``embedder``, and its second, ``encoder``)."""

    embedder: str
    encoder: str
    weights: np.ndarray

    def order(self, message: MessageSignals, candidates: Sequence[Candidate]) -> list[int]:
        """The candidates' indices, best first (ties keep the search's order)."""
        scores = feature_matrix(message, candidates) @ self.weights
        return sorted(range(len(candidates)), key=lambda i: (-scores[i], i))


def save_reranker(reranker: Reranker, path: Path, recipe: dict[str, object]) -> None:
    """Write the weights to ``path`` and ``recipe`` (features, encoders) beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, weights=reranker.weights.astype(np.float64))
    body = {
        **recipe,
        "embedder": reranker.embedder,
        "encoder": reranker.encoder,
        "features": list(FEATURES),
    }
    recipe_path(path).write_text(
        json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


@functools.lru_cache(maxsize=8)
def _read(path: Path) -> Reranker | None:
    try:
        recipe = json.loads(recipe_path(path).read_text(encoding="utf-8"))
        with np.load(path) as data:
            weights = np.asarray(data["weights"], dtype=np.float64)
        if list(recipe.get("features", [])) != list(FEATURES) or weights.shape != (len(FEATURES),):
            raise ValueError("the features it was fitted on are not this version's")
    except (OSError, ValueError, KeyError) as exc:
        # Recall keeps the search's order: a missing file is not worth a failed reply.
        log.warning("recall reranker not loaded from %s: %s", path, exc)
        return None
    return Reranker(
        embedder=str(recipe.get("embedder", "")),
        encoder=str(recipe.get("encoder", "")),
        weights=weights,
    )


def load_reranker(embedder: str, encoder: str, path: str | Path | None = None) -> Reranker | None:
    """The reranker at ``path`` (default: the shipped one) when it was fitted on the
    closeness of ``embedder`` (the memory's first encoder) and ``encoder`` (its second);
    None when not, or when it cannot be read."""
    reranker = _read(Path(path) if path else DEFAULT_RERANKER)
    if reranker is None or (reranker.embedder, reranker.encoder) != (embedder, encoder):
        return None
    return reranker
