"""Reader of CoNLL-2012 (OntoNotes 5.0) ``*_gold_conll`` files for SRL and coreference.

File format (one token per line, whitespace-separated columns, blank line between
sentences, ``#begin document (<doc id>); part <NNN>`` ... ``#end document`` around
each document part)::

    0 doc id   1 part   2 word number   3 word   4 POS   5 parse bit
    6 predicate lemma   7 predicate frameset id   8 word sense   9 speaker
    10 named entities   11 .. N-2 one SRL column per predicate   N-1 coreference

A line has at least 12 columns and every line of a sentence has the same number.

The parse bit (column 6) is the tree's brackets around ``*`` for the token
(``(TOP(S(NP*``, ``*)``, ``*))``); its brackets must balance over the sentence.  A
sentence whose parse column is all ``-``, or with a token whose word or POS is
``XX`` (AllenNLP's reader builds no tree for those), is not checked.

The named-entity column and the SRL columns hold non-nested bracketed spans:
``(ARG0*`` opens, ``*)`` closes, ``(V*)`` and ``(GPE)`` are one-token spans, ``*`` is
inside or outside; every span must close within the sentence.  Each SRL column's
predicate is the first token of that column's own ``V`` span (the column identifies
its predicate itself, so no alignment with the lemma column is needed).

**A column without a** ``(V*)`` **span** (the public release has one, in
``nw/p2.5_c2e_0034`` of CoNLL-2012 train) is kept the way AllenNLP's ``Ontonotes`` +
``SrlReader`` keep it: a frame with no predicate (``predicate_index`` None, an
all-zero predicate indicator) whose argument tags are gold as annotated; the reader
logs one warning per file naming the first such line and column.  AllenNLP pairs
frames with predicate words by position (``zip``), so there one missing ``V`` also
drops the sentence's *last* frame; that is a by-product, not a choice, and here every
other frame of the sentence is kept.  Continuation
(``C-ARG1``) and reference (``R-ARG0``) arguments are kept as role labels of their
own (``B-C-ARG1``, ``B-R-ARG0``), which is what He et al. (2017) and AllenNLP train
and score; :func:`continuation_without_base` reports a ``C-X`` with no preceding
``X`` in the same frame, which the reader logs but accepts (OntoNotes has a few).

The coreference column is ``-`` or items ``(12``, ``12)`` or ``(12)``, separated
by ``|`` or written back to back (``(1(2``); an item closes the most recent open
mention of the same cluster id.

The public OntoNotes 5.0 release writes part number ``-1`` on the token lines of
some documents (e.g. in ``wb/sel``, ``pt/ot``, the ``*_c2e`` documents, a few
``nw/wsj``) whose ``#begin document`` line says part 0; such lines belong to the
header's part (these documents hold no predicates or clusters).  Any other part
number that disagrees with the header is an error.
Clusters are collected per document part (the unit e2e-coref trains on), with
mention offsets counted over the whole part.  The genre is the first component of
the document id (``bc/cctv/00/cctv_0001`` -> ``bc``).

**Where the files are.** A task takes each split as a concatenated ``*_gold_conll``
file or a directory walked for them (:func:`conll2012_files`), or a release's data
directory plus split names (:func:`resolve_conll_paths`): the public
``conll-formatted-ontonotes-5.0/data/{train,development,test,conll-2012-test}`` (v12,
Pradhan et al. 2013) and the CoNLL-2012 shared task's ``conll-2012/v4/data/{train,
development,test}`` both hold ``<split>/data/<language>/annotations/.../*_gold_conll``;
only ``language`` (English) is read.

Every malformed line raises :class:`elmoc.errors.InputFileError` with the file and
1-based line number (``path:line: what is wrong; fix``): a wrong column count, a
malformed cell or unbalanced brackets in the parse, named-entity, SRL or
coreference column.
"""
from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from elmoc.errors import ConfigError, InputFileError

logger = logging.getLogger(__name__)

MIN_COLUMNS = 12
_BEGIN = re.compile(r"^#begin document \((?P<doc>[^)]*)\);\s*part\s+(?P<part>\d+)\s*$")
_END = re.compile(r"^#end document\s*$")
# a span cell (named entities, SRL): "*", "*)", "(LABEL*", "(LABEL*)" or "(LABEL)"
_SPAN_CELL = re.compile(r"^(?:\*\)?|\((?P<label>[^()*\s]+)(?:\*\)?|\)))$")
_PARSE_CELL = re.compile(r"^(?P<open>(?:\([^()*\s]+)*)\*(?P<close>\)*)$")
_COREF_CELL = re.compile(r"^(?:\|?\(?\d+\)?)+$")  # items, "|"-separated or back to back
_COREF_ITEM = re.compile(r"(?P<open>\()?(?P<id>\d+)(?P<close>\))?")
NO_PART = -1  # part number of the token lines of some public-release documents


@dataclass
class ConllSentence:
    """One sentence of a document part.

    Attributes:
        words: tokens.
        pos_tags, lemmas, framesets, word_senses, speakers, named_entities: the
            per-token columns 4, 6, 7, 8, 9, 10 verbatim (``-`` when empty).
        srl_frames: one ``(predicate_index, bio_tags)`` per SRL column, in column order;
            ``predicate_index`` is None for a column without a ``V`` span (module docstring).
        coref_spans: ``(cluster_id, start, end)`` with inclusive token offsets in
            this sentence.
        line: 1-based line number of the sentence's first token (for messages).
    """

    words: list[str]
    pos_tags: list[str]
    lemmas: list[str]
    framesets: list[str]
    word_senses: list[str]
    speakers: list[str]
    named_entities: list[str]
    srl_frames: list[tuple[int | None, list[str]]]
    coref_spans: list[tuple[int, int, int]]
    line: int


@dataclass
class ConllDocument:
    """One ``#begin document ... #end document`` part.

    Attributes:
        doc_id: the id of the ``#begin document`` line, e.g. ``bc/cctv/00/cctv_0001``.
        part: the part number.
        sentences: its sentences in order.
        path: the file it came from.
    """

    doc_id: str
    part: int
    sentences: list[ConllSentence] = field(default_factory=list)
    path: str = ""

    @property
    def doc_key(self) -> str:
        """e2e-coref's key: ``<doc id>_<part>`` (``bc/cctv/00/cctv_0001_0``)."""
        return f"{self.doc_id}_{self.part}"

    @property
    def genre(self) -> str:
        """First component of the document id (``bc``, ``bn``, ``mz``, ``nw``, ``pt``, ``tc``, ``wb``)."""
        return self.doc_id.split("/", 1)[0]

    @property
    def words(self) -> list[str]:
        """All tokens of the part, sentence after sentence."""
        return [w for s in self.sentences for w in s.words]

    @property
    def speakers(self) -> list[str]:
        """Speaker of every token of the part."""
        return [sp for s in self.sentences for sp in s.speakers]

    @property
    def sentence_starts(self) -> list[int]:
        """Part-level offset of each sentence's first token."""
        starts, offset = [], 0
        for s in self.sentences:
            starts.append(offset)
            offset += len(s.words)
        return starts

    @property
    def clusters(self) -> list[list[tuple[int, int]]]:
        """Gold clusters as lists of inclusive ``(start, end)`` part-level offsets.

        Ordered by cluster id; mentions inside a cluster in document order.  A
        mention annotated twice with the same id is kept once.
        """
        by_id: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for offset, sentence in zip(self.sentence_starts, self.sentences):
            for cluster_id, start, end in sentence.coref_spans:
                span = (offset + start, offset + end)
                if span not in by_id[cluster_id]:
                    by_id[cluster_id].append(span)
        return [sorted(by_id[k]) for k in sorted(by_id)]


@dataclass
class SrlInstance:
    """One predicate of one sentence, with its argument structure as BIO tags.

    Attributes:
        words: tokens of the sentence.
        predicate_index: token index of the predicate, or ``None`` for a sentence
            without any predicate (kept, all ``O``, as AllenNLP does) and for an SRL
            column without a ``V`` span (kept with its argument tags, as AllenNLP does).
        tags: BIO tags, one per token (``B-ARG0``, ``I-ARG0``, ``B-V``, ``B-C-ARG1``, ``O``).
        doc_key, sentence_index: where it came from.
    """

    words: list[str]
    predicate_index: int | None
    tags: list[str]
    doc_key: str = ""
    sentence_index: int = 0


def _parse_span_column(cells: list[str], lines: list[int], path: str, what: str) -> list[str]:
    """BIO tags of one span column (``what``: "SRL column 12", "named-entity column 11");
    raises on a malformed cell or unbalanced brackets."""
    tags: list[str] = []
    current: str | None = None
    for cell, lineno in zip(cells, lines):
        m = _SPAN_CELL.match(cell)
        if m is None:
            raise InputFileError(
                path,
                f"{what} has malformed cell {cell!r}; expected '*', '(LABEL*', '*)', '(LABEL*)' or '(LABEL)'",
                lineno,
            )
        label, close = m.group("label"), cell.endswith(")")
        if label is not None:
            if current is not None:
                raise InputFileError(
                    path, f"{what} opens '{label}' while '{current}' is still open; close it first with '*)'", lineno
                )
            tags.append("B-" + label)
            current = label
        elif current is not None:
            tags.append("I-" + current)
        else:
            tags.append("O")
        if close:
            if current is None:
                raise InputFileError(path, f"{what} closes a span that was never opened; remove the ')' or "
                                     "open the span with '(LABEL*'", lineno)
            current = None
    if current is not None:
        raise InputFileError(path, f"{what}: span '{current}' is never closed in this sentence; end it with '*)'",
                             lines[-1])
    return tags


def _check_parse_column(cells: list[str], lines: list[int], path: str) -> None:
    """Raises unless the parse bits are well formed and their brackets balance."""
    depth = 0
    for cell, lineno in zip(cells, lines):
        m = _PARSE_CELL.match(cell)
        if m is None:
            raise InputFileError(path, f"parse column 6 has malformed cell {cell!r}; expected brackets around "
                                 "one '*', such as '(TOP(S(NP*', '*)' or '(NP*)'", lineno)
        depth += m.group("open").count("(") - len(m.group("close"))
        if depth < 0:
            raise InputFileError(path, f"parse column 6: {cell!r} closes {-depth} more bracket(s) than the "
                                 "sentence opened", lineno)
    if depth:
        raise InputFileError(path, f"parse column 6: {depth} bracket(s) opened in this sentence are never closed",
                             lines[-1])


def _parse_coref_column(cells: list[str], lines: list[int], path: str) -> list[tuple[int, int, int]]:
    """``(cluster_id, start, end)`` mentions of one sentence's coreference column."""
    spans: list[tuple[int, int, int]] = []
    open_starts: dict[int, list[int]] = defaultdict(list)
    for index, (cell, lineno) in enumerate(zip(cells, lines)):
        if cell == "-":
            continue
        items = list(_COREF_ITEM.finditer(cell)) if _COREF_CELL.match(cell) else []
        if not items or any(not (m.group("open") or m.group("close")) for m in items):
            raise InputFileError(
                path, f"malformed coreference cell {cell!r}; expected '-' or items '(N', 'N)', '(N)' "
                "separated by '|' or written back to back", lineno
            )
        for m in items:
            item = m.group(0)
            cluster_id = int(m.group("id"))
            if m.group("open") and m.group("close"):
                spans.append((cluster_id, index, index))
            elif m.group("open"):
                open_starts[cluster_id].append(index)
            else:
                if not open_starts[cluster_id]:
                    raise InputFileError(path, f"coreference item {item!r} closes cluster {cluster_id} which is not open", lineno)
                spans.append((cluster_id, open_starts[cluster_id].pop(), index))
    unclosed = sorted(k for k, v in open_starts.items() if v)
    if unclosed:
        raise InputFileError(path, f"coreference cluster(s) {unclosed} opened but not closed in this sentence", lines[-1])
    return sorted(spans, key=lambda s: (s[1], s[2], s[0]))


def _build_sentence(rows: list[list[str]], lines: list[int], path: str, part: int,
                    no_predicate: list[tuple[int, int]] | None = None) -> ConllSentence:
    """The sentence of ``rows`` (file lines ``lines``); SRL columns without a ``V`` span
    are appended to ``no_predicate`` as ``(first line, column)``."""
    width = len(rows[0])
    for row, lineno in zip(rows, lines):
        if len(row) != width:
            raise InputFileError(
                path, f"line has {len(row)} columns but the sentence started with {width}; every token of a sentence needs the same columns", lineno
            )
        try:
            row_part = int(row[1])
            int(row[2])
        except ValueError:
            raise InputFileError(path, f"columns 2-3 (part, word number) must be integers, got {row[1]!r} {row[2]!r}", lineno) from None
        if row_part != part and row_part != NO_PART:
            raise InputFileError(path, f"part number {row_part} disagrees with the '#begin document' part {part}", lineno)
    columns = list(zip(*rows))
    parse = list(columns[5])
    if any(c != "-" for c in parse) and "XX" not in columns[3] and "XX" not in columns[4]:
        _check_parse_column(parse, lines, path)
    _parse_span_column(list(columns[10]), lines, path, "named-entity column 11")
    frames: list[tuple[int | None, list[str]]] = []
    for k in range(11, width - 1):
        tags = _parse_span_column(list(columns[k]), lines, path, f"SRL column {k + 1}")
        v_positions = [i for i, t in enumerate(tags) if t == "B-V"]
        if len(v_positions) > 1:
            raise InputFileError(path, f"SRL column {k + 1} has {len(v_positions)} '(V*' spans; one predicate per column", lines[0])
        if not v_positions and no_predicate is not None:
            no_predicate.append((lines[0], k + 1))
        frames.append((v_positions[0] if v_positions else None, tags))
    return ConllSentence(
        words=list(columns[3]),
        pos_tags=list(columns[4]),
        lemmas=list(columns[6]),
        framesets=list(columns[7]),
        word_senses=list(columns[8]),
        speakers=list(columns[9]),
        named_entities=list(columns[10]),
        srl_frames=frames,
        coref_spans=_parse_coref_column(list(columns[width - 1]), lines, path),
        line=lines[0],
    )


def read_conll2012_file(path: str | Path) -> list[ConllDocument]:
    """Every document part of one ``*_gold_conll`` file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "CoNLL-2012 file not found")
    documents: list[ConllDocument] = []
    current: ConllDocument | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    no_predicate: list[tuple[int, int]] = []

    def flush() -> None:
        if rows:
            assert current is not None
            current.sentences.append(_build_sentence(rows, lines, str(path), current.part, no_predicate))
            rows.clear()
            lines.clear()

    try:
        with open(path, encoding="utf-8") as f:
            for lineno, raw in enumerate(f, 1):
                line = raw.strip()
                if line.startswith("#begin document"):
                    m = _BEGIN.match(line)
                    if m is None:
                        raise InputFileError(path, f"malformed header {line!r}; expected '#begin document (<id>); part <N>'", lineno)
                    if current is not None:
                        raise InputFileError(path, f"'#begin document' inside document {current.doc_id!r}; add '#end document' before it", lineno)
                    current = ConllDocument(m.group("doc"), int(m.group("part")), path=str(path))
                elif line.startswith("#end document"):
                    if current is None or not _END.match(line):
                        raise InputFileError(path, "'#end document' without a matching '#begin document'", lineno)
                    flush()
                    documents.append(current)
                    current = None
                elif not line:
                    if current is not None:
                        flush()
                else:
                    if current is None:
                        raise InputFileError(path, "token line outside '#begin document' ... '#end document'", lineno)
                    row = line.split()
                    if len(row) < MIN_COLUMNS:
                        raise InputFileError(
                            path, f"line has {len(row)} columns; a *_gold_conll line has at least {MIN_COLUMNS} (11 fixed + coreference)", lineno
                        )
                    rows.append(row)
                    lines.append(lineno)
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"not UTF-8 text ({e.reason})") from None
    if current is not None:
        raise InputFileError(path, f"document {current.doc_id!r} part {current.part} has no '#end document'")
    if no_predicate:
        logger.warning(
            "%s:%d: %d SRL column(s) without a '(V*)' predicate span in this file, the first column %d of the "
            "sentence starting here; kept as AllenNLP keeps them: no predicate, argument tags as annotated",
            path, no_predicate[0][0], len(no_predicate), no_predicate[0][1],
        )
    return documents


GOLD_PATTERN = "*gold_conll"  # the releases' *_gold_conll (v4_gold_conll, gold_conll) and AllenNLP's *.gold_conll fixtures
# split -> subdirectory of a release's data directory (conll-formatted-ontonotes-5.0/data,
# conll-2012/v4/data): both name the splits train / development / test
SPLIT_DIRS = {"train": "train", "dev": "development", "test": "test"}
DEFAULT_LANGUAGE = "english"


def conll2012_files(path: str | Path, language: str | None = DEFAULT_LANGUAGE) -> list[Path]:
    """The file itself, or every ``*gold_conll`` file under a directory (sorted).

    A release's split directory holds ``data/<language>/annotations/...``; when
    ``<dir>/data/<language>`` exists only that language is walked (the v4 release
    carries Chinese and Arabic beside English); ``language`` None walks everything.
    A directory without any ``*_gold_conll`` file is an InputFileError (one line).
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        beside = sorted(p.name for p in path.parent.iterdir() if p.is_dir()) if path.parent.is_dir() else []
        found = f" ({path.parent} holds: {', '.join(beside)})" if beside else ""
        raise InputFileError(path, f"CoNLL-2012 path not found{found}; point it at a *_gold_conll file or a "
                             "directory of them (with data_dir: set splits.<split> to one of its directories)")
    root = path
    if language and (path / "data").is_dir():
        languages = sorted(p.name for p in (path / "data").iterdir() if p.is_dir())
        if language in languages:
            root = path / "data" / language
        elif languages:
            raise InputFileError(path / "data", f"has no {language!r} subdirectory (found: {', '.join(languages)}); "
                                 "set the task's `language` to one of them")
    files = sorted(p for p in root.rglob(GOLD_PATTERN) if p.is_file())
    if not files:
        others = sum(1 for p in root.rglob("*_conll") if p.is_file())
        found = f" (only {others} *_conll file(s) without gold columns, e.g. *_auto_conll)" if others else ""
        raise InputFileError(root, f"holds no *gold_conll file{found}; point the task at a split directory of "
                             "conll-formatted-ontonotes-5.0/data (train, development, test, conll-2012-test) that "
                             "holds *_gold_conll files, or at a concatenated *_gold_conll file")
    return files


def read_conll2012(path: str | Path, language: str | None = DEFAULT_LANGUAGE) -> list[ConllDocument]:
    """Documents of a ``*_gold_conll`` file or of every such file under a directory."""
    return [doc for file in conll2012_files(path, language) for doc in read_conll2012_file(file)]


def resolve_conll_paths(owner: str, train: str | None, dev: str | None, test: str | None,
                        data_dir: str | None, splits: dict[str, str] | None) -> dict[str, str | None]:
    """The train / dev / test paths of a CoNLL-2012 task section: the ``train``/``dev``/``test``
    keys as given (files or directories), or ``data_dir`` plus the split names
    (``splits`` over :data:`SPLIT_DIRS`); both at once is a ConfigError.  Nothing is
    read here (a configured path is checked when its split is read)."""

    if splits is not None and not isinstance(splits, dict):
        raise ConfigError(f"{owner}: splits must be a mapping of train/dev/test to directory names, got {splits!r}")
    unknown = sorted(set(splits or {}) - set(SPLIT_DIRS))
    if unknown:
        raise ConfigError(f"{owner}: splits has unknown key(s) {unknown}; accepted: {', '.join(SPLIT_DIRS)}")
    names = {**SPLIT_DIRS, **(splits or {})}
    for split, name in names.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ConfigError(f"{owner}: splits.{split} must be a directory name such as {SPLIT_DIRS[split]!r}, "
                              f"got {name!r}")
    given = {"train": train, "dev": dev, "test": test}
    if data_dir is None:
        return given
    both = [k for k, v in given.items() if v]
    if both:
        raise ConfigError(f"{owner}: give data_dir (with splits) or {'/'.join(both)}, not both; "
                          f"set {', '.join(both)} to null to read data_dir")
    return {split: str(Path(data_dir) / name) for split, name in names.items()}


def continuation_without_base(tags: list[str]) -> list[str]:
    """Labels ``C-X`` that open a span before any ``X`` span in the same frame."""
    seen: set[str] = set()
    bad = []
    for tag in tags:
        if tag.startswith("B-"):
            label = tag[2:]
            if label.startswith("C-") and label[2:] not in seen:
                bad.append(label)
            seen.add(label)
    return bad


def srl_instances(documents: Iterable[ConllDocument]) -> Iterator[SrlInstance]:
    """One :class:`SrlInstance` per predicate (and one all-``O`` instance per
    sentence without predicates), in document order."""
    orphans = 0
    for doc in documents:
        for index, sentence in enumerate(doc.sentences):
            if not sentence.srl_frames:
                yield SrlInstance(sentence.words, None, ["O"] * len(sentence.words), doc.doc_key, index)
                continue
            for predicate, tags in sentence.srl_frames:
                orphans += len(continuation_without_base(tags))
                yield SrlInstance(sentence.words, predicate, tags, doc.doc_key, index)
    if orphans:
        logger.info("%d continuation argument(s) C-X without a preceding X; kept as their own label", orphans)
