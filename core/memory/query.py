"""What a message asks of the memory: how much of the conversation it leans on, which
times it names, and which earlier threads it may be picking up.

A message is searched with its conversational context in proportion to how little it
carries itself. "Ficou melhor?" a month after "Tenho dor de cabeça" shares no word with
it, and its embedding sits as close to yesterday's chatter as to the headache: searched
alone it finds noise. What points back is the conversation: the turns just before it, the
threads the person opened and nobody has seen closed, the last session. Three things in
the message itself say how much to lean on that, and why each:

- few content words (after stop words): the less a message says, the less its own words
  can find; a long, specific question ("When did Caroline go to the support group?")
  gets almost no context, so it is not pulled towards whatever was said last;
- deictic words (ela, isso, lá, it, she, that, there): they point at something said
  before, by definition (a closed class of pronouns and demonstratives, not a topic list);
- a weak anchor: when the message's best match among the person's recent messages does
  not stand out from the rest (in standard deviations of their cosines), its own meaning
  found nothing in particular; a clear standout lowers the weight.

A time the message names ("semana passada", "no Natal", "sábado") is resolved against the
message's own time (:mod:`core.memory.timeexpr`) and becomes a window the search favours,
with little context blended: the date is the anchor.

Threads: among the person's recent messages, one that announced something dated which has
come due ("entrevista amanhã", "a mudança é sábado"), reported something happening ("desde
ontem") or stands close to the message is a likely thread. A matter taken up again later
stays open: its news is still to come ("a peça chega em 10 dias" after "é a embreagem").
Threads, the previous session and the current turns become search seeds weighted by the
context weight and by how close each is to the message; the walk then follows their
follow-up edges as it does for any seed.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from core.embeddings.hashing import fold
from core.memory.heads import RecallHeads
from core.memory.tags import content_words, is_question
from core.memory.timeexpr import Span, asked_unit, names_unit, spans
from core.storage.records import MemoryNode, NodeType
from core.storage.sqlite_graph import Edge

# Pronouns and demonstratives that point back (a closed class of both languages).
DEICTIC = frozenset(
    """
    ele ela eles elas dele dela deles delas isso isto aquilo aquele aquela aqueles aquelas
    disso daquilo naquele naquela nisso la ali lo la it its he she they them him her
    that those there
    """.split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_DAY_S = 86_400.0
DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class QueryConfig:
    """How conversation and time shape a recall query (``GraphConfig.query``)."""

    enabled: bool = True
    pool: int = 200  # recent nodes of the person considered as threads / session context
    thread_days: float = 60.0  # a thread older than this is not "open" any more
    session_gap: timedelta = timedelta(hours=2)  # turns further apart start a new session
    # Context weight by content words: <=2, <=4, <=6, more.
    by_words: tuple[float, float, float, float] = (0.8, 0.5, 0.3, 0.1)
    deictic_bonus: float = 0.2
    anchor_mid: float = 2.6  # best match's standing (std devs) where context is kept as is
    anchor_slope: float = 0.25  # context weight added per std dev below it (taken above)
    window_factor: float = 0.5  # a named time anchors the query: less context
    seed_damping: float = 0.6  # the message's own seeds count x (1 - this x weight)
    prior_scale: float = 1.6  # a thread's seed score at full weight (a top seed scores 1)
    due_days: float = 21.0  # an announced event stays a likely referent this long after
    recency_days: float = 30.0
    window_boost: float = 1.0  # a node inside a named window scores x (1 + this)
    window_outside: float = 0.6  # ... outside every named window x this
    bot_factor: float = 0.7  # the bot's replies in recall results
    question_factor: float = 0.6  # the person's own questions in recall results
    follow_recency: float = 0.4  # recency prior for follow-ups (x context weight)
    # Result diversity (core.memory.search.SearchConfig.diversity) in conversational
    # recall: off. Measured on the dev chats: 0.3 lost implicit follow-ups (0.87 -> 0.83
    # at 5) and cross-lingual probes; a follow-up has one referent.
    diversity: float = 0.0
    # The second encoder's list (GraphMemory's ``second``, e.g. USE beside e5) in
    # conversational recall: its rank-fusion weight beside the first vectors' 1 (see
    # core.memory.search.SearchConfig.second_weight). 0: not searched. Chosen
    # leave-one-person-out on the dev chats (docs/recall.md).
    second_weight: float = 1.5
    # The message's anchor (see thread_priors) read from the second encoder too, the
    # stronger standing kept: a paraphrase one model reads and the other does not is
    # still a message that lands on something.
    second_anchor: bool = True
    # The thread priors count x (1 - found_damping x the best score among the message's
    # own seeds; a seed every list ranks first at full confidence scores 1): a message
    # whose own search already landed on something ("when I resigned from the bank...")
    # needs the open threads less than one that found nothing ("Ficou melhor?"). The
    # anchor reads the same from the pool's cosines alone; this reads every list.
    found_damping: float = 0.0
    # A gathering question's moments spread apart (core.memory.search.SearchConfig.spread)
    # in conversational recall: None keeps the search's setting. Measured on the dev
    # chats (no probe there gathers): no probe moved at 0, 0.15 or 0.3; the rule is about
    # the question, not about where it was asked.
    spread: float | None = None
    # A message that ends in a question naming what it asks about (at least
    # ``names_words`` content words: "tô num restaurante, tem algo no cardápio que me faz
    # mal?") asks for what it names; its thread priors count x ``named_threads``. An
    # announced event of the last weeks is the likely referent of news that points back
    # ("passei!", "foi lindo demais") or of a bare question ("Ficou melhor?", two words at
    # most), not of a question that says what it is about. 1: off. Chosen
    # leave-one-person-out on the dev chats (docs/recall.md, session 8).
    named_threads: float = 0.5
    names_words: int = 3
    # What makes a recent line of the person the thread a follow-up picks up, as shares
    # of its score: its closeness to the message, its eventness (an announced event that
    # came due), its recency, a topic shared with the message, being of the previous
    # session. A thread a later message of the person already took up (a "similar" link
    # from it) counts x ``closed_factor``: 1, none, since a matter told over several
    # messages is still open until its news comes (chosen leave-one-set-out over the dev
    # chats and held-out sets 1-3 among 0.6, 0.8 and 1: docs/recall.md, session 11).
    thread_shares: tuple[float, float, float, float, float] = (0.25, 0.55, 0.1, 0.1, 0.1)
    closed_factor: float = 1.0
    # A request to recall what the person told ("lembra que eu te falei que levanto de
    # madrugada?", "remind me which day my lessons are on?"): the wrapper is left out of
    # what is searched, the encoders then read the thing told rather than "remember",
    # "tell" (which land on the person's lines about forgetting and reminders).
    request_query: bool = True
    # A request for help or a suggestion ("me ajuda com a receita?", "what should I
    # cook?", "me indica um jogo?") is answered by what the person is and likes: their
    # durable self-descriptions (first-person stative statements: "sou X", "I've been X
    # since", "não como", "I can't stand", "adoro", "I prefer": a grammar class, see
    # ``SELF_DESCRIPTION``) among the pool become seeds of
    # ``self_prior x (1 - self_floor + self_floor x closeness)``, the closeness being
    # the line's percentile in the pool by the message's vectors (the better of the two
    # encoders), for the ``self_most`` closest of them (a long history holds many; they
    # should not fill a list of ten). 0: off. The prior is the score of a top direct
    # match (1): the closest self-description stands beside the best line the request's
    # words find. Chosen on the dev chats and held-out sets 1-3 once the grammar covered
    # fears, orders, exclusions and wants (docs/recall.md, session 11); the floor is set
    # so that closeness picks among many.
    self_prior: float = 1.0
    self_floor: float = 0.5
    self_most: int = 6
    # The learned readings beside the grammar (core.memory.heads): a message asks for a
    # suggestion, and a line states what one must fit, also when its head's probability
    # over the second encoder's vector is above these. ``heads``: a weights file other
    # than the shipped one, or "off" (the grammar alone; so is recall without the
    # encoder the heads were fitted on).
    asks_threshold: float = 0.7
    states_threshold: float = 0.7
    # A line the opens head reads above this opens a matter, as one the grammar reads
    # awaiting an outcome does (``awaiting``: a thread longer, and more of one for news):
    # "o carro tá fazendo um barulho estranho" awaits "troquei a bandeja, agora nem sinto
    # nada" though neither the grammar nor the encoders join them. Above 1: off. Chosen
    # leave-one-set-out with the learned order among 0.8, 0.9, 0.95, 0.98 and off
    # (docs/recall.md, session 17).
    opens_threshold: float = 0.9
    heads: str = ""
    # The learned order of the search's first ``rerank_pool`` lines (core.memory.rerank):
    # ``rerank`` a weights file other than the shipped one, or "off" (the search's own
    # order; so is recall without the two encoders the weights were fitted on). Fitted by
    # ``python -m training.recall.rerank`` on the labelled probes of the dev chats and
    # sets 1-11 (docs/recall.md, sessions 16 and 17).
    rerank: str = ""
    rerank_pool: int = 20
    # A question asking for a time by its unit ("em quais dias da semana são minhas
    # aulas?", "which day ...?", "que horas ...?", "em que mês ...?": the interrogative
    # phrase names the answer's kind, :func:`core.memory.timeexpr.asked_unit`): a found
    # line naming a time of that unit ("aula toda terça e quinta") counts x (1 + this),
    # as a line inside a named window does (``window_boost``, the same weight). 0: off.
    answer_boost: float = 1.0
    # A thread's closeness to the message read from the second encoder too, the closer
    # reading kept (as ``second_anchor`` does for the anchor): a follow-up one encoder
    # relates to its thread and the other does not. Measured on the dev chats and the
    # three held-out sets (docs/recall.md, session 10).
    second_closeness: bool = True
    # A line that awaits an outcome (an application, an exam or an interview, a wait for
    # an answer: ``AWAITING``) is an open matter until its news comes, dated or not, and
    # the news may take months ("applied for permanent residency, they say 3 to 6
    # months"): its eventness is at least ``awaiting``, ``awaiting_news`` when the
    # message tells or asks for an outcome ("PASSEI!!!", "they said yes", "deu certo?":
    # ``OUTCOME``, ``ASKS_OUTCOME``), and it stays a thread for ``awaiting_days``. Such
    # news points back by what it is, as a deictic does by its words: its context weight
    # gains ``news_bonus`` (the deictic bonus's size). 0: off. Chosen on the dev chats
    # and sets 1-7 (docs/recall.md, session 13).
    awaiting: float = 0.5
    awaiting_news: float = 1.0
    awaiting_days: float = 120.0
    news_bonus: float = 0.2
    # A word the person said in at most ``bridge_lines`` of their lines of the pool is as
    # specific as a name: the lines sharing it are bridged (:func:`word_bridges`), and a
    # line found for the message passes ``bridge_share`` of its score to the lines it
    # bridges to (core.memory.search: the walk's first step). A question joining two
    # facts is about one and reaches the other by what they share: "da pra eu chegar
    # no ensaio essa semana?" finds "o ensaio é toda quarta as 20h", which reaches
    # "mudaram minha escala, agora saio as 21h toda quarta"; "nessa viagem" finds the
    # field trip to Floripa, which reaches "minha irmã Carol mora em Floripa". Neither
    # encoder relates the second line to the question, and an ordinary edge's hop
    # (strength x relation weight x hop decay, at most 0.2) leaves it below the chatter
    # the search finds. 0: off. Chosen leave-one-set-out on the dev chats and sets 1-7
    # among 0, 0.2, 0.25, 0.3 and 0.4 (docs/recall.md, session 14).
    bridge_share: float = 0.3
    bridge_lines: int = 2
    # Two events the person announced for times at most ``date_bridge_days`` apart are
    # bridged as a rare word bridges two lines (:func:`date_bridges`), for a question
    # that does not ask for a suggestion (``date_bridge_gate``): a line found for it
    # passes ``date_bridge_share`` of its score to each of its ``date_bridge_most``
    # nearest events. A question joining two plans names one and not the other: "o
    # neto vai nascer antes ou depois de eu entrar na faca?" finds the birth "na
    # primeira semana de abril" and, by its date, "a cirurgia do menisco, 14 de abril";
    # "can I get home in time for Bec's wedding on 2 August?" reaches "exchange ends 30
    # July". A request ("what can I cook on Saturday?") wants what fits the person, not
    # what else is planned then. A time longer than ``date_bridge_span_days`` ("next
    # year") dates nothing. 0: off. Chosen leave-one-set-out with the learned order on
    # the dev chats and sets 1-11 (docs/recall.md, session 17).
    date_bridge_share: float = 1.0
    date_bridge_days: float = 21.0
    date_bridge_most: int = 3
    date_bridge_span_days: float = 45.0
    date_bridge_gate: bool = True
    # The learned order reads whether a line is a near event of one of the search's
    # first ``date_bridge_found`` lines (core.memory.rerank, "near_date").
    date_bridge_found: int = 3


# Remember-what-I-told-you wrappers: a closed class of phrasings of both languages (the
# verbs of remembering and telling in the forms that ask the listener to recall, and the
# "... mesmo?" / "... again?" that end such a question). "Remember"/"lembra" asks only
# when it opens a clause or has "you" as its subject: "I can't remember the title" and
# "ela não lembra de nada" tell, they do not ask.
_OPENS = r"(?:^|(?<=[.!?,;:]\s)|(?<=[.!?,;:]))"
_REQUEST = re.compile(
    r"(?:"
    rf"(?:{_OPENS}|\b(?:voc[eê]|vc|tu)\s+)(?:voc[eê]\s+|vc\s+|tu\s+)?(?:se\s+)?lembra"
    r"(?:\s+(?:que|quando|do|da|dos|das|de))?"
    r"|\b(?:eu\s+)?(?:te|lhe)\s+(?:falei|contei|disse|mencionei)(?:\s+que)?"
    rf"|(?:{_OPENS}|\b(?:do\s+|did\s+)?you\s+)remember(?:\s+(?:when|that|what))?"
    r"|\bremind\s+me(?:\s+(?:of|about|what|when|that))?"
    r"|\b(?:did|have)\s+i\s+(?:tell|told|say|said|mention|mentioned)(?:\s+(?:you|that))*"
    r"|\b(?:that\s+|what\s+)?i\s+(?:told|said\s+to|mentioned\s+to)\s+you"
    r"(?:\s+(?:about|that))?"
    r"|\b(?:mesmo|again)(?=\s*\?)"
    r")\b",
    re.IGNORECASE,
)


# Requests for help or a suggestion: the imperatives and questions of helping,
# suggesting and recommending in both languages (a closed class of request forms).
_HELP = re.compile(
    r"\b(?:me\s+(?:ajud[ae]|sugir[ae]|suger[ei]|indic[ae]|recomend[ae]|passa"
    r")\b"
    r"|(?:sugere|sugira|indica|recomenda)(?:\s*\?|\s+(?:um|uma|uns|umas|algum|alguma|algo)\b(?=[^.!]*\?))"
    r"|(?:alguma|uma)\s+(?:indica[cç][aã]o|recomenda[cç][aã]o)"
    r"|o\s+que\s+(?:eu\s+)?(?:fa[cç]o|fazer)\b|o\s+que\s+eu\s+\w+\s+agora"
    r"|o\s+que\s+(?:voc[eê]|vc|tu)\s+(?:acha|sugere|recomenda|indica)"
    r"|\b(?:pode|poderia|consegue)\s+(?:me\s+)?(?:montar|planejar|sugerir|indicar|recomendar)\b"
    r"|\bqual\s+(?:[eé]\s+)?(?:[ao]\s+)?melhor\s+(?:forma|jeito|op[cç][aã]o|maneira)\b"
    # "what should I", "what kind of place should I book", "what food should we pack"
    r"|what\s+(?:\w+\s+){0,3}should\s+(?:i|we)\b|what\s+do\s+i\s+\w+|help\s+me\b"
    r"|\b(?:recommend|suggest)\b|what'?s\s+the\s+best\s+way\b"
    r"|\b(?:can|could|would)\s+you\s+(?:please\s+)?(?:plan|sketch|pick|choose|put\s+together"
    r"|come\s+up\s+with|draw\s+up)\b"
    r"|any\s+(?:\w+\s+)?(?:ideas|tips|suggestions|advice)|which\s+(?:one\s+)?(?:fits|suits)\s+me"
    # The modal questions of choosing ("should I go?", "where can I take her?", "o q
    # vc acha q eu devo aprender?"), the subjunctive of fitting ("coisa q eu possa
    # comer", "somewhere I can get to"), asking for ideas or a list ("me da umas
    # ideia", "me diz umas comida", "ideas?", "give me an 8 week plan") and the
    # first-person questions of what to pick or how to go about it ("o q eu peço
    # lá?", "como eu me organizo?").
    r"|\bshould\s+(?:i|we)\b(?=[^.!]*\?)|\b(?:devo|deveria|devia)\s+\w+[aeio]r\b(?=[^.!]*\?)"
    r"|\b(?:what|where|which|how)\s+(?:\w+\s+){0,3}can\s+(?:i|we)\b"
    r"|\b(?:something|somewhere|anything|anywhere)\s+(?:that\s+)?(?:i|we)\s+(?:can|could|should)\b"
    r"|\b(?:coisa|algo|lugar|algum|alguma)\s+q(?:ue)?\s+(?:eu\s+|a\s+gente\s+)?(?:possa|possamos|d[eê])\b"
    r"|\bq(?:ue)?\s+(?:voc[eê]|vc|tu)\s+(?:acha|sugere|recomenda|indica)\b"
    r"|\b(?:voc[eê]|vc|tu)\s+(?:me\s+)?(?:sugere|recomenda|indica|aconselha)\b(?=[^.!]*\?)"
    r"|\bme\s+(?:diz|fala|d[aá]|manda|mostra|passa)\s+(?:umas|uns|algumas|alguns)\b"
    r"|\b(?:umas?|algumas?)\s+(?:ideias?|dicas?|sugest\w+)|\bideias?\s*\?|\bideas\s*\?"
    r"|\b(?:give|make|write|build)\s+me\s+(?:a|an|some)\s+(?:[\w-]+\s+){0,3}"
    r"(?:plan|list|ideas|tips|schedule|route|menu|recipe|playlist|routine|program+e?)\b"
    r"|\bo\s+q(?:ue)?\s+(?:eu\s+|a\s+gente\s+)?(?:pe[cç]o|levo|compro|cozinho|visto|dou|escolho"
    r"|pe[cç]a|leve|compre|fa[cç]a|d[eê])\b(?=[^.!]*\?)"
    r"|\bcomo\s+(?:(?:eu|a\s+gente)\s+)?(?:me\s+)?\w+o\s*\?"
    r"|\bcomo\s+(?:eu|a\s+gente)\s+(?:me\s+)?\w+o\b(?=[^.!]*\?)"
    r"|\bo\s+q(?:ue)?\s+(?:eu\s+|a\s+gente\s+)?(?:posso|podemos)\b|\bwhich\s+one\s*\?"
    # The imperatives of making something for the person ("monta uma playlist pra
    # mim?", "plan a nice day out for me and Finn?").
    r"|\b(?:monta|faz|cria|prepara|organiza|planeja|escolhe)\s+(?:um|uma|uns|umas)\b(?=[^.!]*\?)"
    r"|(?:^|[.!?,;]\s*)(?:plan|pick|choose|make|put\s+together|sketch|draw\s+up|find)\s+"
    r"(?:me\s+|us\s+)?(?:a|an|some)\b)",
    re.IGNORECASE,
)
# First-person stative self-descriptions: what the person is ("sou", "I'm a", "I've been
# X since"), does not do, alone or with those they live with ("não como", "I don't eat",
# "we don't eat pork", "I can't stand"), likes or hates ("adoro", "odeio", "prefiro", "I
# love", "I'd rather", "o q eu gosto é"), and keeps away from ("não desce", "not my
# thing", "evito"). "estou"/"to" and "I'm" + a gerund are passing states, not
# descriptions; "to evitando" is the one kept, since avoiding is a standing choice.
_STATIVE = (
    r"(?:^|[.!?,;]\s*|\beu\s+|\bque\s+)(?:sou|n[aã]o\s+(?:sou|como|bebo|gosto|suporto|"
    r"aguento|curto)|adoro|amo|odeio|detesto|prefiro|gosto\s+de|curto)\b"
    r"|\b(?:i'?m|i\s+am)\s+(?!\w+ing\b)(?:a\s+|an\s+|more\s+of\s+a\s+|so\s+|very\s+|"
    r"really\s+|not\s+)?\w+"
    r"|\bi'?ve\s+been\s+(?!\w+ing\b)\w+(?:\s+\w+)?\s+(?:since|for)\b"
    r"|\b(?:i|we|they)\s+(?:don'?t|do\s+not|never|can'?t|cannot)\s+(?:eat|drink|stand|like|do"
    r"|bear|handle|focus)\b"
    r"|\bo\s+q(?:ue)?\s+eu\s+(?:gosto|curto|amo|prefiro)\b|\bn[aã]o\s+(?:desce|d[aá]\s+pra\s+mim)\b"
    r"|\bnot\s+(?:for\s+me|my\s+thing|my\s+cup\s+of\s+tea)\b|\b(?:evito|avoid)\b|\bt[oô]\s+evitando\b"
    r"|\bi\s+(?:love|hate|prefer|adore|like|despise)\b|\bi'?d\s+rather\b"
)
# What the person must live with, the other half of what a suggestion must fit: an
# allergy, an intolerance, a fear, a diagnosis, a diet, motion sickness ("alergia desde
# criança", "tenho claustrofobia", "pavor de altura", "I have a genuine phobia of
# planes", "não posso comer", "eu enjoo em estrada").
_CONDITION = (
    r"\b(?:alergi\w*|al[ée]rgic\w*|allerg\w+|intoler\w+|\w*fobi\w*|\w*phobi\w*|cel[ií]ac\w*"
    r"|diab(?:et|[ée]tic)\w*|vegan\w*|vegetarian\w*|enjoo|enjoa|carsick|seasick|diagnos\w+"
    r"|pavor|terrified|\w+itis)\b|\bcrise\s+de\b"
    r"|\b(?:medo|horror)\s+(?:de|a)\b|\b(?:scared|afraid)\s+of\b"
    r"|\bwants?\s+me\s+off\b"
    # The chronic conditions a plan must fit, by name (a closed class: no morpheme
    # marks them in both languages), and what one lives with for them.
    r"|\b(?:asma|asthma\w*|alzheimer\w*|parkinson\w*|epilep\w*|h[iy]pertens\w*|adhd|tdah"
    r"|triggers|gatilhos"
    r"|enxaqueca|migraines?|osteopor\w*|artrose|gout|autis\w*|anemi\w*"
    r"|colesterol|cholesterol|press[aã]o\s+alta|high\s+blood\s+pressure|hearing\s+aid"
    r"|aparelho\s+auditivo|wheelchair|cadeira\s+de\s+rodas|hay\s+fever|h[eé]rnia"
    r"|(?:gastr|sinus|rin|tendin|artr|burs|dermat|col|bronqu|labirint)ite)\b"
    r"|\b(?:tomo|i\s+take|i'?m\s+on)\s+(?:\w+\s+){0,2}(?:rem[eé]dios?|medica\w+|meds|pills?"
    r"|insulin\w*)\b"
    # What someone with the person cannot or will not do, and the terms a plan must
    # keep to ("ela não pode ficar sozinha", "she doesn't eat onion", "he won't take it
    # on motorways", "I don't own a car", "as long as it's under 60 people").
    r"|\bn[aã]o\s+(?:come|bebe|dirige|(?:posso|pode|podem|podemos)\s+\w+[aeio]r)\b"
    r"|\b(?:doesn'?t|does\s+not|won'?t|will\s+not)\s+(?:eat|drink|stand|like|do|take|drive)\b"
    r"|\b(?:don'?t|do\s+not)\s+(?:own|drive)\b|\bas\s+long\s+as\b|\bcontanto\s+que\b"
)
# A doctor's orders ("o médico mandou cortar cerveja", "the orthopedist says no stairs",
# "GP upped my antihistamine and said ..."): a health professional, named by the
# endings of those nouns (-ista, -logo/-loga, -iatra, -peuta; -ologist, -iatrist,
# -ician, -apist), by the usual short forms or, where English "-ist" names other trades
# too (artist, tourist), by name; then a verb of telling or ordering in the same clause.
_CARER = (
    r"(?:m[eé]dic[oa]|doctor|docs?|gp|surgeon|cirurgi[aã]o|nurse|enfermeir[oa]|gi|gastro"
    r"|otorrino|endócrino|endocrino|fisio|physio|derma|gineco|oftalmo|cardio|dr\.?|dra\.?"
    r"|dentist|orthopedist|nutritionist|dietitian|specialist|pharmacist"
    r"|\w+(?:ista|logo|loga|iatra|peuta|ologist|iatrist|ician|apist))"
)
_ORDERS = (
    rf"\b{_CARER}\s+(?:[^\s.!?;]+\s+){{0,4}}?(?:mandou|falou|disse|passou|cortou"
    r"|liberou|pediu|recomendou|receitou|says|said|wants|told\s+me|put\s+me\s+on"
    r"|recommended|prescribed)\b"
    # A ban needs no one named: "ele proibiu pegar peso" (the doctor said just before).
    r"|\bproibiu\b|\bforbade\b"
    # An order to cut something out, whoever gave it ("passou metformina e mandou cortar
    # doce", "told me to cut out caffeine").
    r"|\b(?:mandou|mandaram|told\s+me\s+to)\s+(?:cortar|parar|evitar|tirar|diminuir"
    r"|cut|stop|avoid|quit)\b"
)
# What rules a thing out, in the determiners of exclusion: "nada de fritura", "zero
# glúten", "café nem pensar", "no garlic, no onion", "nothing heavier than a kettle",
# "no more long hikes", "adeus salgadinho", "goodbye malbec".
_EXCLUSION = (
    r"\bnada\s+de\b|\bzero\s+\w{3,}|\bnem\s+pensar\b|\b(?:adeus|goodbye)\s+\w{3,}"
    r"|\bno\s+\w+,\s*no\s+\w+|\bnothing\s+\w+er\s+than\b|\bno\s+more\s+\w{3,}"
)
# What the person or those with them want, and the money a plan has: "quero aprender
# a cozinhar", "Mateo wants the full adrenaline package", "ela só gosta de comida
# caseira", "sem gastar mto", "to dura", "budget is tight", "can't afford".
_WANTS = (
    r"\b(?:quero|i\s+want|wants|s[oó]\s+(?:gosta|gosto|como|escuto|bebo|ouve|come))\b"
    r"|\bsem\s+gastar\b|\bt[oô]\s+(?:dur[oa]|lis[oa]|quebrad[oa]|sem\s+grana)\b|\bbudget\b"
    r"|\bcan'?t\s+afford\b"
    r"|\b(?:preferid[oa]|favou?rite)\b"
    # What someone with the person loves or is taken with ("o Enzo tá viciado em
    # dinossauro", "só fala de T-rex", "she's obsessed with horses", "he adores jazz").
    r"|\b(?:viciad|obcecad|louc|doid|apaixonad)[oa]s?\s+(?:em|por|com)\b|\bs[oó]\s+fala\s+(?:de|em)\b"
    r"|\bobsessed\s+with\b|\bmad\s+about\b|\b(?:loves|hates|adores|prefers)\b"
)
SELF_DESCRIPTION = re.compile(
    "|".join((_STATIVE, _CONDITION, _ORDERS, _EXCLUSION, _WANTS)), re.IGNORECASE
)
# What awaits an outcome, so stays open until its news comes: applying, enrolling,
# submitting, a test, an exam, an interview or an audition to take, an offer or a bid
# made, and waiting for an answer (a closed class of the verbs and nouns of seeking and
# being assessed). "Me inscrevi no concurso, prova em abril" is the likely referent of
# "PASSEI!!!" months later; "the old boat needs a new outboard" is a need, not this.
AWAITING = re.compile(
    r"\b(?:(?:me\s+)?inscrevi|inscri[cç](?:[aã]o|[oõ]es)|candidatei|candidatura|dei\s+entrada"
    r"|mandei\s+(?:o\s+|a\s+|meu\s+|minha\s+)?(?:curr[ií]culo|cv|proposta|documentos?"
    r"|papelada|portf[oó]lio|projeto|inscri[cç][aã]o)"
    r"|(?:pedi|solicitei|requeri)\s+(?:o\s+|a\s+|um\s+|uma\s+|meu\s+|minha\s+)?(?:visto|"
    r"transfer[eê]ncia|empr[eé]stimo|financiamento|aposentadoria|revis[aã]o|aumento|licen[cç]a"
    r"|guarda|cidadania|passaporte|resid[eê]ncia|bolsa)"
    r"|provas?|entrevistas?|processo\s+seletivo|seletiva|concursos?|vestibular|enem|audi[cç][aã]o"
    r"|prestar|esperando\s+(?:o\s+|a\s+)?(?:resultado|resposta|retorno|aprova[cç][aã]o|an[aá]lise)"
    r"|aguardando|[eé]\s+esperar|resultado\s+sai|(?:fila|lista)\s+de\s+espera|torcendo"
    r"|procurando\s+(?:um\s+|uma\s+)?(?:ap[eê]|apartamento|casa|emprego|trampo|vaga|est[aá]gio)"
    r"|appl(?:ied|ying|ication)|submitted|sent\s+(?:off|in)\s+(?:my|the|our|an?)"
    r"|put\s+in\s+(?:an?\s+)?(?:offer|bid|application|for)|made\s+an\s+offer"
    r"|interview(?:s|ing)?|audition(?:s|ing)?|exams?|tests?|tryouts?|assessments?"
    r"|shortlisted|waiting\s+(?:on|for|to\s+hear|list)|(?:now|so)\s+(?:i|we)\s+wait"
    r"|results?\s+(?:are|is|come|comes)\s+out|fingers\s+crossed|hoping\s+to\s+get"
    r"|looking\s+for\s+(?:a|an)\s+(?:flat|job|house|place|new)|trying\s+to\s+get|pending"
    r"|appeal)\b",
    re.IGNORECASE,
)
# The news of an outcome: succeeding, failing, being taken or turned down, a result or an
# answer come (a closed class: "passei", "fui aprovada", "contrataram ela", "peguei as
# chaves", "I'm in", "it came through", "they said yes", "results are out"). A line
# telling one closes its matter ("saiu a nota da prova: passei raspando" awaits nothing).
OUTCOME = re.compile(
    r"\b(?:passe+i+|passamos|passou|aprovad[oa]s?|aprovaram|reprovad[oa]s?|reprovei|entrei"
    r"|entramos|consegui(?:mos)?|deu\s+(?:certo|errado)|n[aã]o\s+deu|contrataram|aceitaram"
    r"|fui\s+(?:aceit|chamad|selecionad|contratad|aprovad|promovid)[oa]|ganh(?:ei|amos)"
    r"|peguei\s+as\s+chaves|saiu\s+(?:o|a)\s+(?:resultado|nota|lista|aprova[cç][aã]o|visto)"
    r"|(?:in)?deferid[oa]|negad[oa]|recusad[oa]|oficialmente|passed|failed"
    r"|got\s+in(?=\s*(?:[!.,]|$))|got\s+into"
    r"|(?:i'?m|we'?re)\s+in\b(?!\s+\w)|it'?s\s+(?:mine|ours|official)|accepted|approved"
    r"|rejected|turned\s+(?:\w+\s+)?down|didn'?t\s+get|came\s+through|offered\s+(?:me|us)"
    r"|got\s+the\s+(?:job|place|part|role|offer|keys|letter|call|email|results?|grant|visa"
    r"|go-ahead|all-clear)|results?\s+(?:are|is|came|come)\s+(?:in|out|back)|results?\s+came"
    r"|officially|granted|denied|said\s+yes|heard\s+back|won(?!['’]t)"
    r"|terminei|completei|finalizei|conclu[ií]|finished|did\s+it|made\s+it|nailed\s+it)\b",
    re.IGNORECASE,
)


# Asking for an outcome: "e aí, deu certo?", "como foi?", "alguma novidade?", "how did it
# go?", "any news?", "did you hear back?".
ASKS_OUTCOME = re.compile(
    r"\b(?:como\s+(?:foi|que\s+foi|ficou)|deu\s+certo|alguma\s+(?:novidade|not[ií]cia)|e\s+a[ií](?=\s*\?)"
    r"|how\s+did\s+(?:it|that|the\s+\w+)\s+go|any\s+(?:news|word)|heard\s+(?:back|anything))\b",
    re.IGNORECASE,
)


def asks_for_help(text: str) -> bool:
    """Whether the message asks for help or a suggestion (see ``QueryConfig.self_prior``)."""
    return _HELP.search(text) is not None


@functools.lru_cache(maxsize=1 << 16)
def describes_self(content: str) -> bool:
    """Whether a line states something durable about its author (not a question)."""
    return not is_question(content) and SELF_DESCRIPTION.search(content) is not None


@functools.lru_cache(maxsize=1 << 16)
def awaits_outcome(content: str) -> bool:
    """Whether a line tells of something whose outcome is awaited (see ``AWAITING``),
    and not of the outcome itself (``OUTCOME``)."""
    return (
        not is_question(content)
        and AWAITING.search(content) is not None
        and OUTCOME.search(content) is None
    )


def self_priors(
    plan: QueryPlan,
    query_vector: np.ndarray,
    pool: Sequence[MemoryNode],
    vectors: dict[str, np.ndarray],
    *,
    config: QueryConfig | None = None,
    second: tuple[np.ndarray, dict[str, np.ndarray]] | None = None,
    heads: RecallHeads | None = None,
) -> dict[str, float]:
    """Seeds for the person's self-descriptions when the message asks for help or a
    suggestion (``QueryConfig.self_prior``); empty otherwise. ``heads``: the learned
    readings of both (:mod:`core.memory.heads`) over ``second``'s vectors, taken beside
    the grammar's."""
    cfg = config or QueryConfig()
    if cfg.self_prior <= 0:
        return {}
    if not asks_suggestion(plan, heads, second[0] if second is not None else None, cfg):
        return {}
    mine = [n for n in pool if n.type is NodeType.USER_MESSAGE and n.id in vectors]
    wanted = [n.id for n in mine if describes_self(n.content)]
    if heads is not None and second is not None:
        wanted += _stating(mine, set(wanted), heads, second[1], cfg.states_threshold)
    if not wanted:
        return {}
    closeness = dict.fromkeys(wanted, 0.0)
    lists = [(query_vector, vectors)]
    if second is not None:
        lists.append(second)
    for query, pooled in lists:
        ids = [n.id for n in mine if n.id in pooled]
        if len(ids) < 2:
            continue
        sims = np.einsum(
            "ij,j->i",
            np.stack([pooled[i] for i in ids]),
            np.asarray(query, dtype=np.float32),
        )
        # Percentile in the pool: the encoders' cosines differ in scale, ranks do not.
        order = sims.argsort().argsort() / (len(ids) - 1)
        for node_id, rank in zip(ids, order, strict=True):
            if node_id in closeness:
                closeness[node_id] = max(closeness[node_id], float(rank))
    floor = cfg.self_floor
    closest = sorted(closeness.items(), key=lambda kv: -kv[1])[: cfg.self_most]
    return {i: cfg.self_prior * (1.0 - floor + floor * c) for i, c in closest}


def asks_suggestion(
    plan: QueryPlan,
    heads: RecallHeads | None,
    second_query: np.ndarray | None,
    config: QueryConfig | None = None,
) -> bool:
    """Whether the message asks for help or a suggestion: the grammar says so
    (``plan.helps``) or the learned ``asks`` head does over the message's second vector."""
    if plan.helps:
        return True
    if heads is None or second_query is None:
        return False
    threshold = (config or QueryConfig()).asks_threshold
    return float(heads.asks.probabilities(second_query)) > threshold


def _stating(
    lines: Sequence[MemoryNode],
    known: Collection[str],
    heads: RecallHeads,
    vectors: dict[str, np.ndarray],
    threshold: float,
) -> list[str]:
    """Ids of ``lines`` not in ``known`` (and not questions) that the ``states`` head reads
    as stating what a suggestion must fit, from their ``vectors``."""
    ids = [
        n.id for n in lines if n.id not in known and n.id in vectors and not is_question(n.content)
    ]
    if not ids:
        return []
    said = heads.states.probabilities(np.stack([vectors[i] for i in ids]))
    return [i for i, p in zip(ids, said, strict=True) if p > threshold]


def recall_request(text: str) -> str | None:
    """``text`` without its remember-what-I-told-you wrapper when it has one and says
    something besides (a content word); None otherwise."""
    stripped = _REQUEST.sub(" ", text)
    if stripped == text:
        return None
    stripped = re.sub(r"\s+([,.!?])", r"\1", re.sub(r"\s+", " ", stripped))
    stripped = re.sub(r",+(?=[?!.]|$)", "", stripped).strip(" ,")
    return stripped if content_words(stripped) else None


def names_its_subject(plan: QueryPlan, config: QueryConfig | None = None) -> bool:
    """Whether the message ends in a question that names what it asks about (see
    ``QueryConfig.named_threads``)."""
    cfg = config or QueryConfig()
    return is_question(plan.text) and len(plan.words) >= cfg.names_words


@dataclass(slots=True)
class QueryPlan:
    text: str
    at: datetime | None
    words: list[str]
    deictic: bool
    windows: list[Span]
    weight: float  # 0..1, how much conversational context is blended in
    reasons: list[str] = field(default_factory=list)
    # The message without its remember-what-I-told-you wrapper, when it is such a request
    # (:func:`recall_request`); None otherwise.
    request: str | None = None
    # The unit of time the message asks for (:func:`core.memory.timeexpr.asked_unit`).
    unit: str | None = None
    # Whether the message asks for help or a suggestion (:func:`asks_for_help`).
    helps: bool = False
    # Whether the message tells an outcome or asks for one ("passei!!", "they said yes",
    # "e aí, deu certo?", "any news?": ``OUTCOME``, ``ASKS_OUTCOME``).
    news: bool = False

    def answer_factor(self, content: str, config: QueryConfig | None = None) -> float:
        """How much a found line counts for naming the kind of time asked for (see
        ``QueryConfig.answer_boost``): 1 when the message asks for none."""
        cfg = config or QueryConfig()
        if self.unit is None or cfg.answer_boost <= 0 or not names_unit(content, self.unit):
            return 1.0
        return 1.0 + cfg.answer_boost

    def searched(self, config: QueryConfig | None = None) -> str:
        """The text the search reads: the request without its wrapper when
        ``QueryConfig.request_query``, else the message."""
        cfg = config or QueryConfig()
        return self.request if self.request is not None and cfg.request_query else self.text


def plan_query(text: str, at: datetime | None, config: QueryConfig | None = None) -> QueryPlan:
    """Read what the message carries itself (see the module's docstring)."""
    cfg = config or QueryConfig()
    words = content_words(text)
    tokens = set(_WORD.findall(fold(text).lower()))
    deictic = bool(tokens & DEICTIC)
    # A time named in a question is where to look ("o que eu comi ontem?"); in a statement
    # it dates the news being told ("she flew back yesterday"), not what to recall.
    asks = "?" in text
    helps = asks_for_help(text)
    # A request for a suggestion is about plans: "hosting brunch on Sunday, what should I
    # make?" names the coming Sunday, not the last; "last Sunday" stays in the past.
    windows = (
        [s for s in spans(text, at, past=not helps) if not s.future and s.start < at - DAY]
        if at is not None and asks
        else []
    )
    n = len(words)
    low, mid, high, rest = cfg.by_words
    weight = low if n <= 2 else mid if n <= 4 else high if n <= 6 else rest
    reasons = [f"{n} content word(s)"]
    if deictic:
        weight += cfg.deictic_bonus
        reasons.append("deictic")
    if windows:
        weight *= cfg.window_factor
        reasons.append("names a time: " + ", ".join(s.text for s in windows))
    news = OUTCOME.search(text) is not None or ASKS_OUTCOME.search(text) is not None
    if news and cfg.news_bonus:
        # News of an outcome points back by what it is, as a deictic does by its words.
        weight += cfg.news_bonus
        reasons.append("tells or asks for an outcome")
    plan = QueryPlan(
        text, at, words, deictic, windows, min(weight, 1.0), reasons, helps=helps, news=news
    )
    plan.request = recall_request(text)
    if plan.request is not None:
        reasons.append("recall request")
    plan.unit = asked_unit(text)
    if plan.unit is not None:
        reasons.append(f"asks for a {plan.unit}")
    return plan


# Gathering questions (``gathers``): the auxiliaries that end an English wh-phrase, words
# ending in "s" that are no plural nouns, and the Portuguese words that ask for several
# things or for everything so far. Closed classes of grammar, not topics.
_AUXILIARIES = frozenset(
    "do does did has have had is are was were can could will would should".split()
)
_NOT_PLURAL = frozenset("is was has does this his its us yes thus always perhaps".split())
_WH = frozenset("what which where who whom".split())
_PT_GATHERING = frozenset("quais quaisquer ja".split())


def gathers(text: str) -> bool:
    """Whether a question asks for several things told at different times: a plural
    thing asked for ("what books has she read?", "which cities has Jon visited?",
    "quais lugares ...", "que filmes ..."), the present perfect of a wh-question ("where
    has Melanie camped?": all the times so far), "já" in a Portuguese question ("o que
    eu já te contei ...?"), or a count of times ("how many times", "quantas vezes").
    Such a question wants its facts from several moments (core.memory.search spreads
    them), where a question about one event ("what did she paint last week?") does not."""
    if "?" not in text:
        return False
    tokens = _WORD.findall(fold(text).lower())
    if not tokens:
        return False
    if _PT_GATHERING & set(tokens):
        return True
    pairs = set(itertools.pairwise(tokens))
    if ("how", "many") in pairs or ("quantas", "vezes") in pairs:
        return True
    if "que" in tokens:  # "que filmes ...": a plural noun right after it
        after = tokens[tokens.index("que") + 1 : tokens.index("que") + 2]
        if after and _plural(after[0]):
            return True
    if tokens[0] not in _WH:
        return False
    for n, token in enumerate(tokens[1:5], start=1):
        if token in _AUXILIARIES:
            # "where has Melanie camped?": a perfect asks about every time so far;
            # "what are her pets' names?": a plural answer.
            return token in ("has", "have", "are", "were") and n + 1 < len(tokens)
        if _plural(token):
            return True
    return False


def _plural(word: str) -> bool:
    """An English or Portuguese plural noun, by its ending (good enough after a wh-word)."""
    return (
        len(word) > 3
        and word.endswith("s")
        and not word.endswith(("ss", "us"))
        and (word not in _NOT_PLURAL)
    )


def followed_up(pool: Sequence[MemoryNode], edges: Iterable[Edge]) -> set[str]:
    """Nodes of ``pool`` that a later message of the person in ``pool`` links to as
    "similar" (the cosine link made when that message was stored): threads taken up
    again, so no longer open."""
    mine = {n.id for n in pool if n.type is NodeType.USER_MESSAGE}
    return {
        e.to_id
        for e in edges
        if e.relation_type == "similar" and e.from_id in mine and e.to_id in mine
    }


def thread_priors(
    plan: QueryPlan,
    query_vector: np.ndarray,
    pool: Sequence[MemoryNode],
    vectors: dict[str, np.ndarray],
    *,
    context_vector: np.ndarray | None = None,
    closed: Collection[str] = (),
    topics: Sequence[str] = (),
    config: QueryConfig | None = None,
    second: tuple[np.ndarray, dict[str, np.ndarray]] | None = None,
    heads: RecallHeads | None = None,
) -> dict[str, float]:
    """Seed scores for the person's recent nodes as referents of a follow-up message.

    ``context_vector``: the message's vector with its current turns blended in (the
    threads' closeness is read from it). ``pool``: the person's latest nodes before the
    message, oldest first; ``closed``:
    those a later message of the person already followed up. Also raises ``plan.weight``
    when the message is weakly anchored in them. ``second``: the message's vector of the
    memory's second encoder and the pool's (those that have one): the message is as
    anchored as the encoder that reads it better says."""
    cfg = config or QueryConfig()
    at = plan.at
    topic_set = set(topics)
    if at is None or not pool:
        return {}
    ids = [n.id for n in pool if n.id in vectors]
    if not ids:
        return {}
    matrix = np.stack([vectors[i] for i in ids])
    # einsum, not BLAS: a threaded BLAS call on a busy machine waits for its threads.
    sims = np.einsum("ij,j->i", matrix, np.asarray(query_vector, dtype=np.float32))
    # Closeness to the message relative to the rest of the pool: e5 puts everything
    # between 0.75 and 0.9, so what tells is how far a node stands out from the others.
    # Closeness of the threads to the message with its current turns ("e se eu for mal?"
    # right after "amanhã tenho prova": the exam), when there are any.
    near = sims
    if context_vector is not None:
        near = np.einsum("ij,j->i", matrix, np.asarray(context_vector, dtype=np.float32))
    confidence = _closeness(near)
    # The second encoder's cosines over the pool's nodes that have its vector (rows
    # ``have`` of ``ids``): what one encoder reads as close counts, whichever it is.
    have: list[int] = []
    sims2 = np.zeros(0, dtype=np.float32)
    if second is not None:
        query2, pool2 = second
        have = [i for i, node_id in enumerate(ids) if node_id in pool2]
        if have:
            sims2 = np.einsum(
                "ij,j->i",
                np.stack([pool2[ids[i]] for i in have]),
                np.asarray(query2, dtype=np.float32),
            )
    if cfg.second_closeness and len(have) >= 8:
        confidence[have] = np.maximum(confidence[have], _closeness(sims2))
    index = {node_id: i for i, node_id in enumerate(ids)}
    # Sessions: split the pool where turns are further apart than the session gap.
    sessions: list[list[MemoryNode]] = []
    for node in pool:
        if not sessions or node.timestamp - sessions[-1][-1].timestamp > cfg.session_gap:
            sessions.append([])
        sessions[-1].append(node)
    current = sessions[-1] if at - sessions[-1][-1].timestamp <= cfg.session_gap else []
    previous = sessions[-2] if current and len(sessions) > 1 else sessions[-1]
    if previous is current:
        previous = []
    in_current = {n.id for n in current}
    in_previous = {n.id for n in previous}
    # How far its best match stands out from the person's other messages (in standard
    # deviations): a message whose own meaning lands on something stands out by 3 or
    # more; one that finds nothing in particular by 2 or less. The current session is
    # left out: a message resembles the turns it answers, which anchors nothing.
    earlier = np.array([node_id not in in_current for node_id in ids])
    own = sims[earlier] if earlier.sum() >= 2 else sims
    anchor = _standing(own)
    kept = [k for k, i in enumerate(have) if earlier[i]]
    if len(kept) >= 8:
        anchor = max(anchor, _standing(sims2[kept]))
    shift = cfg.anchor_slope * float(np.clip(cfg.anchor_mid - anchor, -1.0, 1.0))
    plan.weight = float(np.clip(plan.weight + shift, 0.0, 1.0))
    plan.reasons.append(f"anchor {anchor:.2f}")
    weight = plan.weight
    if weight <= 0:
        return {}

    # A question naming its subject asks for it, not for the open threads.
    named = cfg.named_threads if names_its_subject(plan, cfg) else 1.0
    close_share, event_share, recency_share, topic_share, previous_share = cfg.thread_shares
    # How strongly a line awaiting an outcome is a thread: most when the message tells
    # or asks for an outcome.
    awaited = cfg.awaiting_news if plan.news else cfg.awaiting
    opened = _opened(heads, second[1] if second is not None else {}, cfg.opens_threshold)
    priors: dict[str, float] = {}
    for node in pool:
        i = index.get(node.id)
        if i is None or node.type is not NodeType.USER_MESSAGE:
            continue
        if is_question(node.content):
            continue  # a question the person asked is not a thread they opened
        if node.id in in_current:
            # The current session's turns are in the prompt and in the query vector (see
            # GraphMemory.search_in_conversation): seeds from them would lead the walk
            # back into the session the prompt already shows.
            continue
        # An announced event is as old as the time since it came due, not since it was
        # told: "prova em abril" said in January is news in April.
        age = (at - node.timestamp).total_seconds() / _DAY_S
        overdue = _overdue(node, at)
        if overdue is not None:
            age = min(age, overdue)
        awaiting = awaited > 0 and (node.id in opened or awaits_outcome(node.content))
        if age > (max(cfg.thread_days, cfg.awaiting_days) if awaiting else cfg.thread_days):
            continue
        event = _eventness(node, cfg, overdue)
        if awaiting:
            event = max(event, awaited)
        recency = math.exp(-age / cfg.recency_days)
        shared = bool(topic_set & set(node.tags))
        score = (
            close_share * float(confidence[i])
            + event_share * event
            + recency_share * recency
            + topic_share * shared
            + previous_share * (node.id in in_previous)
        )
        if node.id in closed:
            score *= cfg.closed_factor
        priors[node.id] = cfg.prior_scale * weight * score * named
    return priors


def _opened(
    heads: RecallHeads | None, vectors: dict[str, np.ndarray], threshold: float
) -> set[str]:
    """The lines (of ``vectors``: id -> the second encoder's vector) the opens head reads
    as opening a matter, above ``threshold``."""
    if heads is None or heads.opens is None or threshold > 1.0:
        return set()
    return {i for i, p in heads.opens.read(vectors).items() if p > threshold}


def _closeness(sims: np.ndarray) -> np.ndarray:
    """Each of ``sims`` as how far it stands above the pool's median, in 2.5 standard
    deviations, clipped to 0..1 (cosines differ in scale between encoders; this does not)."""
    spread = float(sims.std()) or 1.0
    return np.clip((sims - float(np.median(sims))) / (2.5 * spread), 0.0, 1.0)


def _standing(sims: np.ndarray) -> float:
    """How far the best of ``sims`` stands out from the rest, in standard deviations."""
    return float((sims.max() - np.median(sims)) / (float(sims.std()) or 1.0))


_CLAUSE_END = re.compile(r"[.!?\n]")


def _asked(content: str, named: str) -> bool:
    """Whether the sentence of ``content`` naming ``named`` (as :func:`spans` gives it:
    folded) is a question."""
    folded = fold(content).lower()
    where = folded.find(named)
    if where < 0:
        return False
    end = _CLAUSE_END.search(folded, where + len(named))
    return end is not None and end.group() == "?"


@functools.lru_cache(maxsize=1 << 16)
def _dated(content: str, timestamp: datetime) -> tuple[Span, ...]:
    """The times a stored message names, as told (they never change: parsed once)."""
    return tuple(spans(content, timestamp, past=False))


def _overdue(node: MemoryNode, at: datetime) -> float | None:
    """Days since the latest event the line announced came due by ``at`` (0 while it is
    under way); None when it announced none that has."""
    latest: float | None = None
    for found in _dated(node.content, node.timestamp):
        if not found.future or found.start > at + DAY or _asked(node.content, found.text):
            continue
        overdue = max(0.0, (at - found.end).total_seconds() / _DAY_S)
        latest = overdue if latest is None else min(latest, overdue)
    return latest


def eventness(node: MemoryNode, at: datetime, config: QueryConfig | None = None) -> float:
    """How much ``node`` announced an event that has come due by ``at``, or reported a
    happening (:func:`_eventness`; the awaited outcomes of ``thread_priors`` aside)."""
    return _eventness(node, config or QueryConfig(), _overdue(node, at))


def _eventness(node: MemoryNode, cfg: QueryConfig, overdue: float | None) -> float:
    """1 for an announced event that has come due (``overdue``: :func:`_overdue`), less
    as it recedes; 0.3 for a reported happening dated before the day it was told ("desde
    ontem", "há uma semana"); 0 otherwise ("today" dates all chatter)."""
    best = 0.0 if overdue is None else math.exp(-overdue / cfg.due_days)
    for found in _dated(node.content, node.timestamp):
        if (
            not found.future
            and found.start.date() < node.timestamp.date()
            and not _asked(node.content, found.text)  # "is tomorrow a holiday?": asked
        ):
            best = max(best, 0.3)
    return best


def word_bridges(pool: Sequence[MemoryNode], most: int) -> dict[str, list[str]]:
    """The person's lines in ``pool`` (their messages, not the bot's replies, which echo
    them) that share a word said in at most ``most`` of those lines: node id -> the
    lines it shares such a word with (once per word: two such words, two bridges).
    Rarity is read in the person's own recent history: "Floripa" or "quarta" told twice
    links two facts, "trabalho" said every week links nothing."""
    said: dict[str, list[str]] = {}
    for node in pool:
        if node.type is NodeType.USER_MESSAGE:
            for word in _line_words(node.content):
                said.setdefault(word, []).append(node.id)
    bridges: dict[str, list[str]] = {}
    for ids in said.values():
        if 2 <= len(ids) <= most:
            for one in ids:
                bridges.setdefault(one, []).extend(other for other in ids if other != one)
    return bridges


def date_bridges(
    pool: Sequence[MemoryNode], days: float, most: int, span_days: float
) -> dict[str, list[str]]:
    """The person's lines in ``pool`` that announced events for times at most ``days``
    apart: node id -> up to ``most`` such lines, nearest first. An event is a time a line
    names ahead of when it was told ("cirurgia dia 14 de abril", "exchange ends 30
    July"), not asked about ("dia 13 é feriado?"), no longer than ``span_days``; the
    bot's lines echo the person's and are left out, as for :func:`word_bridges`."""
    ids: list[str] = []
    times: list[tuple[float, float, int]] = []  # (start, end, line): one row an event
    for node in pool:
        if node.type is not NodeType.USER_MESSAGE:
            continue
        told = _events(node.content, node.timestamp, span_days)
        if told:
            times += [(start, end, len(ids)) for start, end in told]
            ids.append(node.id)
    if len(ids) < 2:
        return {}
    spans_of = np.array(times)
    starts, ends, line = spans_of[:, 0], spans_of[:, 1], spans_of[:, 2].astype(np.intp)
    # Days between every two events (0 when they overlap), then the nearest of each two
    # lines' events: numpy, as a pool of 200 lines may hold a hundred dated ones.
    gaps = np.maximum(np.maximum.outer(starts, starts) - np.minimum.outer(ends, ends), 0.0)
    first = np.flatnonzero(np.r_[True, line[1:] != line[:-1]])  # a line's events are adjacent
    nearest = np.minimum.reduceat(np.minimum.reduceat(gaps, first, axis=0), first, axis=1)
    nearest = nearest / _DAY_S
    np.fill_diagonal(nearest, np.inf)
    # Each line's nearest first, ties by id (the order does not depend on the pool's): an
    # id's rank adds less than a second's difference (times are in whole seconds).
    key = nearest + np.argsort(np.argsort(ids)) * (0.01 / len(ids) / _DAY_S)
    order = np.argsort(key, axis=1)[:, :most]
    bridges: dict[str, list[str]] = {}
    for i, one in enumerate(ids):
        near = [ids[j] for j in order[i] if nearest[i, j] <= days]
        if near:
            bridges[one] = near
    return bridges


@functools.lru_cache(maxsize=1 << 16)
def _events(content: str, timestamp: datetime, span_days: float) -> tuple[tuple[float, float], ...]:
    """The events a stored line announced, as (start, end) timestamps (see
    :func:`date_bridges`; a line never changes: read once)."""
    return tuple(
        (found.start.timestamp(), found.end.timestamp())
        for found in _dated(content, timestamp)
        if found.future
        and (found.end - found.start).total_seconds() <= span_days * _DAY_S
        and not _asked(content, found.text)
    )


@functools.lru_cache(maxsize=1 << 16)
def _line_words(content: str) -> tuple[str, ...]:
    """A stored line's content words (they never change: read once)."""
    return tuple(content_words(content))
