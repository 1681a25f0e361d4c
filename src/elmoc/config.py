"""Loading YAML, and resolving an LM variant into a complete spec.

A workflow config names pretraining variants; each one is a preset from
``config/lm/<preset>.yaml`` (paper sizes) plus overrides: first the config-wide
``pretrain.overrides`` (e.g. the demo's small sizes), then the variant's own::

    pretrain:
      overrides: {encoder: {cell_size: 256, projection_size: 64}}
      variants:
        elmo-c: {}                                  # preset config/lm/elmo-c.yaml
        elmo-c-small: {preset: elmo-c, overrides: {train: {batch_size: 16}}}

Variants beyond the paper (issue 25: Transformer bi-LMs, ...) are opt-in by name:
``pretrain.extra_variants: [trans-base-c, gpt-sampled]`` trains presets
``config/lm/<name>.yaml`` as if each were listed as ``<name>: {}`` (:func:`variant_names`).

Overrides by block type: ``pretrain.overrides_by_type.<section>.<type>`` (section
``input``, ``encoder``, ``output`` or ``optimizer``) is merged into a variant's section
only when that section's ``type`` is ``<type>``, so one config can shrink LSTM and
Transformer encoders (or sampled and adaptive outputs) without giving an LSTM's
``cell_size`` to a Transformer::

    pretrain:
      overrides_by_type:
        encoder:
          elmo_lstm: {cell_size: 32, projection_size: 16}
          transformer: {d_model: 16, heads: 2, d_ff: 32, num_layers: 2}

Layers, later wins: the preset, ``pretrain.overrides``, ``pretrain.overrides_by_type``,
the variant's own ``overrides``.  The type a section has is read from the preset with
the other layers merged (a variant's overrides may change it).
Mappings merge key by key; any other value (lists included) replaces; a layer that changes
a section's ``type`` starts that section afresh (:func:`merge_layer`: ELMo-C's ``vectors`` do
not stay in a softmax output).  The numbers
of the resolved spec that only make sense in a range (batch size, bptt, epochs, sizes,
learning rates, dropouts...: the ``OPTION_RANGES`` each block declares beside its options,
:func:`declared_ranges`) are checked there and then,
so ``snakemake -n`` stops with one line naming the key where the bad value was set
(``pretrain.overrides.train.batch_size: -4 must be a positive integer ...``); the
builders keep their own checks.  The declarations are read from the blocks' source
files, not imported, and this module imports only PyYAML, so the Snakefile can use it
without loading torch.

:func:`load_yaml` is the one reader of YAML configuration files (presets, workflow
configs, LM specs, the run's ``spec.yaml`` the tables read).
"""
from __future__ import annotations

import ast
import copy
import functools
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import yaml

from elmoc.config_section import check_keys
from elmoc.registry import by_name, kind_sources, list_available
from elmoc.errors import ConfigError, InputFileError

ARTIFACT_PREFIXES = ("results/", "resources/")
DEFAULT_VOCAB = "results/vocab/vocab.txt"
DEFAULT_DATA = {"train": "results/corpus/train", "heldout": "results/corpus/heldout.txt"}
# The keys an LM spec (a preset, an override layer, a resolved spec) may hold, and its `data`'s
# (the typed sections are checked by the registry, `train` by TrainSettings).
SPEC_KEYS = ("name", "description", "vocab", "data", "input", "encoder", "output", "optimizer", "train")
DATA_KEYS = ("train", "heldout", "tokenizer")
# The keys of the workflow config's `pretrain` section and of one of its variants (the schema's).
PRETRAIN_KEYS = ("presets_dir", "variants", "extra_variants", "overrides_by_type", "overrides", "vocab")
VARIANT_KEYS = ("preset", "overrides", "released")


def load_yaml(path: str | Path, mapping: str | None = None) -> Any:
    """The YAML document in ``path``: the one YAML reader of elmoc's configuration files.

    Args:
        path: the file.
        mapping: what the file must hold, when it must be a mapping (``"an LM spec"``): an
            empty file is then an empty mapping, and anything else but a mapping an error.

    Raises:
        InputFileError: naming the file (and the line of a YAML error) when it is missing,
            not UTF-8, not valid YAML, or not the mapping ``mapping`` asks for.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "file not found")
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputFileError(path, f"invalid YAML: {getattr(e, 'problem', e)}", None if line is None else line + 1) from None
    except UnicodeDecodeError as e:
        raise InputFileError(path, f"not valid UTF-8 ({e.reason})") from None
    if mapping is None:
        return data
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputFileError(path, f"{mapping} must be a mapping of keys to values, got a {type(data).__name__}")
    return data


def deep_merge(base: Any, override: Any) -> Any:
    """``override`` merged into a copy of ``base`` (mappings recursively)."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = deep_merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def merge_layer(spec: dict[str, Any], layer: dict[str, Any], under: dict[str, Any] | None = None) -> dict[str, Any]:
    """An override ``layer`` merged into a copy of the LM ``spec`` (:func:`deep_merge`), except
    that a typed section (:data:`TYPED_SECTIONS`) whose ``type`` the layer changes starts afresh
    from the layer's: a type switch (``output: {type: sampled_softmax, ...}`` over ELMo-C's cosine
    output) keeps none of the old type's keys (its ``vectors``), which the new type would refuse.

    Args:
        under: ``{section: options}`` merged beneath a switched section (the
            ``pretrain.overrides_by_type`` options of the new type).
    """
    merged = deep_merge(spec, layer)
    for section in TYPED_SECTIONS:
        old, new = spec.get(section), layer.get(section)
        if isinstance(old, dict) and isinstance(new, dict) and "type" in new and new["type"] != old.get("type"):
            merged[section] = deep_merge((under or {}).get(section) or {}, new)
    return merged


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The ranges a block declares for its options, beside them (``OPTION_RANGES = {"cell_size":
# "int > 0", "cell_clip": "> 0 or null"}``): range -> (what the value must be, test); a range
# ending in " or null" allows null too.
RANGES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int > 0": ("a positive integer", lambda v: _is_int(v) and v > 0),
    "int >= 0": ("an integer >= 0", lambda v: _is_int(v) and v >= 0),
    "> 0": ("a number > 0", lambda v: _is_number(v) and v > 0),
    ">= 0": ("a number >= 0", lambda v: _is_number(v) and v >= 0),
    "[0, 1)": ("a number in [0, 1)", lambda v: _is_number(v) and 0 <= v < 1),
}
OR_NULL = " or null"
RANGES_ATTRIBUTE = "OPTION_RANGES"
SRC = Path(__file__).resolve().parent
# The spec sections checked by check_spec_numbers, in order: section -> (the file and class declaring the
# ranges of an untyped section, "" for a module-level mapping by `type`) or None for a registered kind.
RANGED_SECTIONS: dict[str, tuple[Path, str] | None] = {
    "train": (SRC / "train" / "settings.py", "TrainSettings"),
    "encoder": None, "input": None, "output": None,
    "optimizer": (SRC / "train" / "optim.py", ""),
}


def check_range(value: Any, rule: str, name: str) -> None:
    """ConfigError ``"<name>: <value> must be <what>"`` unless ``value`` is in range ``rule`` (:data:`RANGES`)."""
    nullable = rule.endswith(OR_NULL)
    expected, ok = RANGES[rule.removesuffix(OR_NULL)]
    if (value is None and nullable) or ok(value):
        return
    hint = " (YAML reads 1e-4 as a string: write 1.0e-4)" if isinstance(value, str) else ""
    raise ConfigError(f"{name}: {value!r} must be {expected}{OR_NULL if nullable else ''}{hint}")


@functools.lru_cache(maxsize=None)
def _declarations(path: Path) -> dict[str, tuple[list[str], tuple[str, str] | None, dict[str, Any]]]:
    """The classes of the module at ``path``, read from its source without importing it (no
    torch when the workflow is parsed): class name -> (base class names, the ``(kind, name)`` of
    its ``@register``, its literal ``OPTION_RANGES``); key "" holds the module's own ``OPTION_RANGES``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

    def ranges(body: list[ast.stmt]) -> dict[str, Any]:
        for node in body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == RANGES_ATTRIBUTE for t in targets):
                return ast.literal_eval(node.value)
        return {}

    found: dict[str, tuple[list[str], tuple[str, str] | None, dict[str, Any]]] = {"": ([], None, ranges(tree.body))}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            registered = next((tuple(a.value for a in d.args) for d in node.decorator_list
                               if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "register"
                               and len(d.args) == 2 and all(isinstance(a, ast.Constant) for a in d.args)), None)
            found[node.name] = (bases, registered, ranges(node.body))
    return found


def declared_ranges(section: str, block: dict[str, Any]) -> dict[str, str]:
    """The ranges the reader of spec section ``section`` declares for its options, ``{}`` where
    none is found: a registered block's ``OPTION_RANGES`` merged along its base classes (the
    class registered as the block's ``type``), ``TrainSettings.OPTION_RANGES`` for ``train``, the
    optimizer type's entry of ``train/optim.py``'s ``OPTION_RANGES`` for ``optimizer``."""
    owner, kind = RANGED_SECTIONS[section], block.get("type")
    if owner is not None and owner[1]:
        return _declarations(owner[0])[owner[1]][2]
    if not isinstance(kind, str):  # no type, or not a name: the builder says what is wrong
        return {}
    if owner is not None:
        return _declarations(owner[0])[""][2].get(kind) or {}
    classes = {name: info for path in kind_sources(section) for name, info in _declarations(path).items() if name}

    def merged(name: str) -> dict[str, str]:
        bases, _, own = classes.get(name, ([], None, {}))
        out: dict[str, str] = {}
        for base in reversed(bases):
            out.update(merged(base))
        return {**out, **own}

    return next((merged(name) for name, (_, registered, _) in classes.items()
                 if registered == (section, kind)), {})


WORKFLOW_SCHEMA = "workflow/schemas/config.schema.yaml"
# The sections every whole workflow config defines (the shipped ones: config, shared-data, paper,
# rehearsal); a config file without them is an overlay, meant to be layered over a whole config.
WHOLE_CONFIG_KEYS = ("corpus", "pretrain")


def check_workflow_config(config: Any, source: str, required: bool = True, schema_path: str | Path | None = None) -> None:
    """ConfigError in one line for the first key or value of a whole workflow ``config`` that
    the workflow's schema refuses (what Snakemake's ``validate`` checks before a run, whose own
    message dumps the schema), for the Snakefile and the commands that read a whole config
    outside Snakemake (``elmoc params --config``, ``elmoc config-dump``). An unknown key is named
    with the closest known one, also where the schema reads any other key as an entry of its own
    (``tasks.seed`` beside ``tasks.seeds``: not a task section but a misspelled option).

    Args:
        config: the parsed config.
        source: where it came from (a file, ``--section-json``), for the message.
        required: whether a missing schema (elmoc installed away from its checkout, run
            outside it) is an error; False for a config Snakemake has validated already.
        schema_path: the schema file (default: the checkout's, else the working directory's).
    """
    import jsonschema

    if schema_path is None:
        here = Path(__file__).resolve().parents[2] / WORKFLOW_SCHEMA  # a source checkout
        schema_path = here if here.is_file() else Path(WORKFLOW_SCHEMA)  # else the working directory's
    path = Path(schema_path)
    if not path.is_file():
        if not required:
            return
        raise ConfigError(f"{source}: cannot check its keys: no {WORKFLOW_SCHEMA} here (run from the elmoc checkout)")
    schema = load_yaml(path)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if not errors:
        return
    error = min(errors, key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))
    _check_entry_names(schema, config, list(error.absolute_path), source)
    name = ".".join(map(str, error.absolute_path)) or "(top level)"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties") or {})
        patterns = list(error.schema.get("patternProperties") or {})
        extra = {k: v for k, v in error.instance.items() if not any(re.search(p, k) for p in patterns)}
        check_keys(extra, known, f"{source}: {name}")
    raise ConfigError(f"config {source}: {name}: {error.message}")


def _check_entry_names(schema: dict[str, Any], config: Any, path: list[Any], source: str) -> None:
    """ConfigError "unknown key (did you mean ...)" for a key on ``path`` (the place of a schema
    error) that the schema reads as a free entry (``additionalProperties`` is a schema, e.g. a task
    section) while it is one letter away from a declared option of the same mapping."""
    import difflib

    node, value, names = schema, config, []
    for key in path:
        node = _resolve_ref(schema, node)
        props = node.get("properties") or {}
        if isinstance(key, str) and isinstance(value, dict) and key not in props \
                and isinstance(node.get("additionalProperties"), dict):
            close = difflib.get_close_matches(key, list(props), n=1, cutoff=0.8)
            if close:
                where = ".".join(names) or "(top level)"
                raise ConfigError(f"config {source}: {where}: unknown key {key!r} (did you mean {close[0]!r}?); "
                                  f"known keys: {', '.join(sorted(props))}, or entries of their own")
        if isinstance(key, str) and key in props:
            node = props[key]
        elif isinstance(key, str):
            node = node.get("additionalProperties")
        else:
            node = node.get("items")
        value = value[key] if isinstance(value, (dict, list)) else None
        names.append(str(key))
        if not isinstance(node, dict):
            return


def _resolve_ref(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node``, or the local definition its ``$ref`` (``#/$defs/name``) names."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/"):
        for part in ref[2:].split("/"):
            schema = schema[part]
        return schema
    return node


def check_whole_config(config: dict[str, Any], files: list[str], default: str) -> None:
    """ConfigError in one line when the ``--configfile`` files, which replace the ``default``
    config, are an overlay (no :data:`WHOLE_CONFIG_KEYS`, e.g. config/distill.yaml alone): its
    missing sections would silently take the schema's defaults (the paper's sizes) or fail later on
    a missing input. ``config``: the merged config before the schema's defaults; no ``files``: the
    default is used, nothing to check."""
    if not files:
        return
    missing = [k for k in WHOLE_CONFIG_KEYS if k not in config]
    if not missing:
        return
    given = " ".join(files)
    sets = ", ".join(sorted(k for k in config if not str(k).startswith("_"))) or "nothing"
    raise ConfigError(f"--configfile {given}: an overlay (it sets {sets}, no {' or '.join(missing)}), not a whole "
                      f"config, and it replaced the default {default}; layer it over a whole config instead: "
                      f"--configfile {default} {given}")


def check_spec_keys(spec: dict[str, Any], name: str) -> None:
    """ConfigError naming an unknown top-level or ``data`` key of ``spec`` (and the closest known one).

    Args:
        spec: an LM spec or a layer of one (a preset, ``pretrain.overrides``...).
        name: where it comes from, for the message.
    """
    check_keys(spec, SPEC_KEYS, name)
    if isinstance(spec.get("data"), dict):
        check_keys(spec["data"], DATA_KEYS, f"{name}.data")


def check_spec_numbers(spec: dict[str, Any], where: Callable[[str, str], str]) -> None:
    """ConfigError for the first number of ``spec`` outside the range its block declares
    (:func:`declared_ranges`).

    Args:
        spec: a resolved LM spec.
        where: ``(section, key) -> name of the setting`` for the message, e.g. the
            config key path the value came from.
    """
    for section in RANGED_SECTIONS:
        block = spec.get(section)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ConfigError(f"{where(section, '')}: must be a mapping of options, got {block!r}")
        for key, rule in declared_ranges(section, block).items():
            if key in block:
                check_range(block[key], rule, where(section, key))


def resolve_variant(config: dict[str, Any], variant: str, presets_dir: str | Path | None = None) -> dict[str, Any]:
    """The complete LM spec of ``variant`` under a (validated) workflow ``config``.

    A number out of range (:func:`check_spec_numbers`) is a ConfigError naming where it
    was set: ``pretrain.variants.<variant>.overrides...``,
    ``pretrain.overrides_by_type.<section>.<type>...``, ``pretrain.overrides...`` or the
    preset file.  ``variant`` is a key of ``pretrain.variants`` or a name of
    ``pretrain.extra_variants`` (:func:`variant_names`).
    """
    pretrain = config.get("pretrain") or {}
    check_keys(pretrain, PRETRAIN_KEYS, "pretrain")
    names = variant_names(config)
    if variant not in names:
        raise ConfigError(f"unknown variant {variant!r}; the config defines: {', '.join(sorted(names)) or '(none)'}")
    entry = (pretrain.get("variants") or {}).get(variant) or {}
    check_keys(entry, VARIANT_KEYS, f"pretrain.variants.{variant}")
    presets_dir = Path(presets_dir or pretrain.get("presets_dir", "config/lm"))
    preset_name = entry.get("preset", variant)
    preset_path = presets_dir / f"{preset_name}.yaml"
    if not preset_path.is_file():
        available = sorted(p.stem for p in presets_dir.glob("*.yaml"))
        raise ConfigError(f"variant {variant!r}: no preset {preset_path}; available presets: {', '.join(available)}")
    spec = load_yaml(preset_path, mapping="an LM preset")
    own = entry.get("overrides", {}) or {}
    general = pretrain.get("overrides", {}) or {}
    # (name of the layer in messages, the layer as a partial spec), later wins
    by_type = by_type_layers(pretrain, merge_layer(merge_layer(spec, general), own))
    layers = [("pretrain.overrides", general), *by_type, (f"pretrain.variants.{variant}.overrides", own)]
    under = {section: options for _, layer in by_type for section, options in layer.items()}
    check_spec_keys(spec, str(preset_path))
    for name, layer in layers:
        check_spec_keys(layer, name)
        spec = merge_layer(spec, layer, under)

    def where(section: str, key: str) -> str:
        """The last layer that set ``section.key`` (or the section itself when key is "")."""
        for name, layer in layers[::-1]:
            if section in layer and (not key or (isinstance(layer[section], dict) and key in layer[section])):
                prefix = name if name.startswith(BY_TYPE) else f"{name}.{section}"
                return ".".join(filter(None, (prefix, key)))
        return f"{preset_path}: " + ".".join(filter(None, (section, key)))

    check_spec_numbers(spec, where)
    spec["name"] = variant
    spec.setdefault("vocab", pretrain.get("vocab", DEFAULT_VOCAB))
    spec["data"] = deep_merge(DEFAULT_DATA, spec.get("data", {}) or {})
    return spec


STUDENT_KEYS = ("teacher", "preset", "overrides", "lm_weight", "layer_weights", "layers", "init_from_teacher")
# the keys of a student that only the workflow reads; `elmoc distill --section-json` gets the others
STUDENT_WORKFLOW_KEYS = ("teacher", "preset", "overrides")


def resolve_student(config: dict[str, Any], student: str, presets_dir: str | Path | None = None) -> dict[str, Any]:
    """The LM spec of ``distill.students.<student>`` (``elmoc distill``, issue 36.1).

    Without ``preset``: the teacher variant's spec with the student's ``overrides`` (e.g.
    ``{encoder: {num_layers: 1}}``).  With ``preset``: that preset resolved as a variant is
    (``pretrain.overrides`` and ``overrides_by_type`` apply, so a Transformer student gets the
    config's Transformer sizes), then the student's ``overrides``; its vocabulary and data are
    the teacher's either way (the student reads the teacher's corpus windows).  The student
    trains one direction at a time (``train.directions: separate``).
    """
    students = (config.get("distill") or {}).get("students") or {}
    if student not in students:
        raise ConfigError(f"unknown student {student!r}; distill.students defines: {', '.join(students) or '(none)'}")
    entry = students[student] or {}
    check_keys(entry, STUDENT_KEYS, f"distill.students.{student}")
    if entry.get("teacher") not in variant_names(config):
        raise ConfigError(f"distill.students.{student}.teacher {entry.get('teacher')!r} is not a variant of this "
                          f"config; name one of: {', '.join(variant_names(config))}")
    teacher = resolve_variant(config, entry["teacher"], presets_dir)
    own = entry.get("overrides") or {}
    check_spec_keys(own, f"distill.students.{student}.overrides")
    if entry.get("preset"):
        pretrain = {**config["pretrain"], "variants": {student: {"preset": entry["preset"], "overrides": own}},
                    "extra_variants": []}
        spec = resolve_variant({**config, "pretrain": pretrain}, student, presets_dir)
        spec.update(vocab=teacher["vocab"], data=teacher["data"])
    else:
        spec = merge_layer(teacher, own)
    spec["name"] = student
    how = ", ".join(filter(None, (f"preset {entry['preset']}" if entry.get("preset") else "",
                                  f"overrides {json.dumps(own, sort_keys=True)}" if own else "")))
    spec["description"] = f"student of {entry['teacher']} (elmoc distill){': ' + how if how else ''}"
    spec["train"] = {**spec.get("train", {}), "directions": "separate"}
    return spec


BY_TYPE = "pretrain.overrides_by_type"
TYPED_SECTIONS = ("input", "encoder", "output", "optimizer")


def variant_names(config: dict[str, Any]) -> list[str]:
    """The pretraining variants of a workflow ``config``, in order: the keys of
    ``pretrain.variants``, then the opt-in names of ``pretrain.extra_variants`` (each a
    preset trained with no overrides of its own).  A name given twice is a ConfigError."""
    pretrain = config.get("pretrain") or {}
    defined = list(pretrain.get("variants") or {})
    extra = list(pretrain.get("extra_variants") or [])
    for name in extra:
        if not isinstance(name, str):
            raise ConfigError(f"pretrain.extra_variants: {name!r} is not a preset name (a string)")
        if name in defined:
            raise ConfigError(f"pretrain.extra_variants lists {name!r}, which pretrain.variants defines too; "
                              "keep one (pretrain.variants to give it overrides of its own)")
    if len(set(extra)) != len(extra):
        twice = sorted({n for n in extra if extra.count(n) > 1})
        raise ConfigError(f"pretrain.extra_variants lists {', '.join(twice)} more than once")
    return defined + extra


def by_type_layers(pretrain: dict[str, Any], spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``pretrain.overrides_by_type`` layers that apply to ``spec`` (the preset with the
    other override layers merged): ``(name, {section: options})`` for each section whose
    ``type`` has an entry, in :data:`TYPED_SECTIONS` order."""
    by_type = pretrain.get("overrides_by_type") or {}
    layers = []
    for section in TYPED_SECTIONS:
        kind = (spec.get(section) or {}).get("type") if isinstance(spec.get(section), dict) else None
        options = (by_type.get(section) or {}).get(kind) if kind is not None else None
        if options:
            layers.append((f"{BY_TYPE}.{section}.{kind}", {section: options}))
    return layers


def artifact_paths(spec: Any) -> list[str]:
    """Every string in ``spec`` that names a workflow artifact (``results/...``), sorted."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)
        elif isinstance(node, str) and node.startswith(ARTIFACT_PREFIXES):
            yield node

    return sorted(set(walk(spec)))


def dump_yaml(data: Any, path: str | Path) -> None:
    """Write YAML atomically."""
    from elmoc.io.atomic import atomic_file

    with atomic_file(path) as f:
        yaml.safe_dump(data, f, sort_keys=False)



# --- the typed options of registered methods (fine-tuning recipes, compression formats, prune methods) ---

def _kinds_of(hint: Any) -> tuple[type, ...]:
    """The value types a dataclass field's annotation allows (``float | None`` -> (float,))."""
    import types
    import typing

    args = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    return tuple(a for a in args if a is not type(None))


def typed_options(options_class: type, mapping: dict[str, Any] | None, name: str) -> Any:
    """``options_class`` (a dataclass: one field per option, with its type and default) built from
    ``mapping`` (None: the defaults), every key and value checked.

    The field's annotation is its type (``bool``, ``int``, ``float``, ``str``, or one of them ``|
    None``; an int is a float), ``OPTION_RANGES`` on the class its range (:data:`RANGES`),
    ``CHOICES`` (option -> allowed strings) its values, and a ``check(name)`` method on the built
    object any rule across options.

    Raises:
        ConfigError: one line naming ``name.key``: an unknown key (with the closest known one), a
            value of the wrong type, out of range or not among the choices (with the closest one).
    """
    import dataclasses
    import typing

    from elmoc.config_section import Section

    fields = dataclasses.fields(options_class)
    section = Section(mapping or {}, name, [f.name for f in fields])
    hints = typing.get_type_hints(options_class)
    values = {}
    for f in fields:
        if f.name in section.data:
            values[f.name] = section.get(f.name, _kinds_of(hints[f.name]))
    for key, rule in getattr(options_class, RANGES_ATTRIBUTE, {}).items():
        if key in values:
            check_range(values[key], rule, f"config {name}.{key}")
    for key, allowed in getattr(options_class, "CHOICES", {}).items():
        if key in values:
            check_choice(values[key], allowed, f"{name}.{key}")
    built = options_class(**values)
    if hasattr(built, "check"):
        built.check(name)
    return built


def registered(kind: str, name: Any, where: str) -> type:
    """The class registered as ``name`` of ``kind``, chosen by the config key ``where``
    (``fine_tune.recipe``, ``prune.method``); another value is one ConfigError line naming the key,
    the closest registered name and every one."""
    check_choice(name, list_available(kind), where)
    return by_name(kind, name)


def check_choice(value: Any, allowed: Iterable[str], where: str) -> None:
    """One ConfigError line unless ``value`` is one of ``allowed``: the config key ``where``, the
    closest allowed value and every one."""
    import difflib

    allowed = list(allowed)
    if value not in allowed:
        close = difflib.get_close_matches(str(value), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"config {where} must be one of {', '.join(allowed)}, got {value!r}{hint}")


def check_section(kind: str, name: str, options: dict[str, Any] | None, where: str | None = None) -> Any:
    """The typed options of the registered method ``name`` of ``kind`` (``"recipe"``,
    ``"compression"``, ``"prune_method"``) from a config mapping of its options.

    Args:
        kind: the registry kind.
        name: the method's registered name (a recipe, a format, a prune method).
        options: the method's own options (None or {}: its defaults); not the keys every method
            of the kind shares (``fine_tune.lm_lr``, ``prune.levels``: their readers check those).
        where: the mapping's dotted place in the config, for messages (default ``"<kind> <name>"``).

    Returns:
        An instance of the class's ``Options`` dataclass.

    Raises:
        ConfigError: one line: an unknown name (with the closest registered one and the list), or
            a bad key or value (:func:`typed_options`).
    """
    cls = by_name(kind, name)
    return typed_options(cls.Options, options, where or f"{kind} {name!r}")


def declared_values(kind: str, attribute: str) -> dict[str, Any]:
    """Registered name -> the literal value of ``attribute`` in its class body (None when it has
    none), for every class of ``kind`` in its package and the ``.py`` plug-ins of
    ``$ELMOC_PLUGINS``, read from their source without importing them (no torch: the workflow
    reads the compressed formats its compression table copies this way, ``TABLE_COPY``, and
    ``elmoc compress --help`` their names)."""
    found: dict[str, Any] = {}
    for path in kind_sources(kind):
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "register" and len(deco.args) == 2
                        and all(isinstance(a, ast.Constant) for a in deco.args) and deco.args[0].value == kind):
                    found[deco.args[1].value] = next(
                        (ast.literal_eval(n.value) for n in node.body if isinstance(n, ast.Assign)
                         and any(isinstance(t, ast.Name) and t.id == attribute for t in n.targets)), None)
    return dict(sorted(found.items()))
