"""A small regex sentence splitter and PTB-like tokenizer for raw English text.

Used only for ``raw`` corpus sources (e.g. gensim's ``lee_background.cor``: one
untokenized news article per line).  Hand-written instead of pulling in NLTK or
spaCy because the project needs nothing more than a deterministic, documented
approximation of the Penn Treebank conventions that the 1B Word Benchmark uses,
and because HF ``tokenizers`` pre-tokenizers do not split English clitics.

Rules, in order:

1. **Sentences** end at ``.``, ``!`` or ``?`` (optionally followed by closing
   quotes/brackets) when whitespace and then an upper-case letter, a digit or an
   opening quote follow, unless the period ends a known abbreviation
   (``Mr.``, ``Dr.``, ``U.S.``, single capital initials ``J.``, ...).
2. **Clitics** are split off as in the PTB: ``don't -> do n't``, ``can't -> ca n't``,
   ``John's -> John 's`` (likewise ``'re 've 'll 'd 'm``).
3. **Tokens** are, by priority: known abbreviations with their period; dotted
   acronyms (``U.S.``); numbers with internal ``. , :`` (``3.5``, ``1,000``,
   ``4:00pm``); words with internal hyphens or apostrophes (``bio-identical``,
   ``O'Neill``); ``--`` and ``...``; otherwise every other non-space character on
   its own (``, ; : ( ) " '`` and the final ``.``).

Quotes are kept as the raw characters (no PTB ``\u0060\u0060``/``''`` conversion).
"""
from __future__ import annotations

import re

ABBREVIATIONS = (
    "Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "Gen", "Col", "Lt", "Sgt", "Capt",
    "Sen", "Rep", "Gov", "Pres", "Rev", "Hon", "Inc", "Ltd", "Co", "Corp", "Bros", "vs", "etc",
    "No", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec",
)
_ABBREV = "|".join(ABBREVIATIONS)

# A sentence boundary: the whitespace after [.!?] + optional closers, when the next
# sentence visibly starts, and the period does not end an abbreviation/initial.
_SENT_END = re.compile(
    r"""(?<![A-Z]\.[A-Z]\.)          # not after a dotted acronym such as U.S.
        (?<!\b[A-Z]\.)               # not after a single initial such as J.
        (?:(?<=[.!?])|(?<=[.!?]["')\]]))  # after the end mark (and maybe one closer)
        \s+
        (?=["'(\[]?[A-Z0-9])         # the next sentence starts visibly
    """,
    re.VERBOSE,
)
_ABBREV_END = re.compile(rf"\b(?:{_ABBREV})\.$")

_CLITIC_NT = re.compile(r"(?i)\b(\w+?)(n't)\b")
_CLITIC = re.compile(r"(?i)(\w)('s|'re|'ve|'ll|'d|'m)\b")

_TOKEN = re.compile(
    rf"""(?:\b(?:{_ABBREV})\.)               # abbreviation with its period
       | (?:[A-Za-z]\.){{2,}}                 # dotted acronym U.S.
       | \b[A-Z]\.(?=\s+[A-Z][a-z])            # initial before a name: J. Smith
       | n't\b | N'T\b                        # split-off negation
       | '(?:s|re|ve|ll|d|m|S|RE|VE|LL|D|M)\b # split-off clitic
       | \d+(?:[.,:]\d+)*[A-Za-z]*             # numbers 3.5 1,000 4:00pm 1990s
       | \w+(?:['\u2019-]\w+)*                 # words, hyphenated words, O'Neill
       | --+ | \.\.\.                          # dashes and ellipsis
       | \S                                    # any other character on its own
    """,
    re.VERBOSE,
)


def split_sentences(text: str) -> list[str]:
    """Split a paragraph of raw text into sentence strings (see module rules)."""
    pieces = _SENT_END.split(text.strip())
    sentences: list[str] = []
    for piece in pieces:
        # Re-join pieces that were cut after an abbreviation such as "Mr."
        if sentences and _ABBREV_END.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return [s for s in sentences if s.strip()]


def tokenize(sentence: str) -> list[str]:
    """PTB-like tokens of one sentence (see module rules)."""
    sentence = _CLITIC_NT.sub(r"\1 \2", sentence)
    sentence = _CLITIC.sub(r"\1 \2", sentence)
    return _TOKEN.findall(sentence)
