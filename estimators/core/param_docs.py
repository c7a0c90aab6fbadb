"""Rewrite (or check) the parameter tables of ``docs/ESTIMATORS.md`` from the declarations.

``python -m estimators.core.param_docs`` rewrites every ``<!-- params:KEY -->`` ...
``<!-- /params:KEY -->`` block with :func:`markdown_table`, and writes a section for every
registered method that has no block of its own yet (its class summary, module and table,
between ``<!-- generated:methods -->`` and ``<!-- /generated:methods -->`` at the end): a new
method needs no hand-written documentation to be listed. ``--check`` writes nothing and exits 1
when the file is out of date. Estimators of plugins (:mod:`estimators.core.plugins`) are
documented by their own distributions, not here.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from .params import _literal
from .registry import ESTIMATORS, estimator_params

__all__ = ["GENERATED_END", "GENERATED_START", "doc_blocks", "documented_keys", "main",
           "markdown_table", "render_doc"]

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "ESTIMATORS.md"


def markdown_table(name: str) -> str:
    """The parameter table of the estimator registered as ``name``, as Markdown.

    >>> print(markdown_table("im"))  # doctest: +NORMALIZE_WHITESPACE
    | parameter | accepts | default | meaning |
    | --- | --- | --- | --- |
    | `n_bins` | int in [1, inf] | `10` | Equal-width confidence bins over [0, 1]. |
    | `temperature_scaling` | bool | `True` | Fit a temperature on the validation set and apply it to validation and target logits (the papers' "Post T"; False: "Pre T"). |
    """
    declared = estimator_params(name)
    if not declared:
        return "No hyper-parameters."
    rows = ["| parameter | accepts | default | meaning |", "| --- | --- | --- | --- |"]
    for p in declared:
        doc = p.doc if not p.acts else f"{p.doc} Acts with {p.acts}."
        if p.affects == "speed":
            doc += " Speed only: estimates agree to float round-off."
        rows.append(f"| `{p.name}` | {p.allowed()} | {_literal(p.default)} | {doc} |")
    return "\n".join(rows)


_BLOCK = re.compile(
    r"(<!-- params:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /params:(?P=name) -->)", re.DOTALL
)
#: The markers of the section written for the methods without a section of their own.
GENERATED_START = "<!-- generated:methods -->"
GENERATED_END = "<!-- /generated:methods -->"
_GENERATED = re.compile(re.escape(GENERATED_START) + r".*?" + re.escape(GENERATED_END),
                        re.DOTALL)


def documented_keys() -> list[str]:
    """The registry keys ``docs/ESTIMATORS.md`` documents: every estimator of this package
    (plugins' are documented by their own distributions), in registry order."""
    from .plugins import plugin_estimators

    plugins = plugin_estimators()
    return [k for k in ESTIMATORS if k not in plugins]


def _summary(key: str) -> str:
    cls = ESTIMATORS[key]
    doc = (cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in doc.splitlines()) or cls.__qualname__


def _generated_section(keys: Sequence[str]) -> str:
    lines = [GENERATED_START, ""]
    if keys:
        lines += ["## Methods without a section of their own", "",
                  "Written by `python -m estimators.core.param_docs` from each class's summary "
                  "and `PARAMS`; a hand-written section with the method's `<!-- params:KEY -->` "
                  "block above replaces its entry here.", ""]
    for key in keys:
        module = ESTIMATORS[key].__module__.replace(".", "/") + ".py"
        lines += [f"### `{key}`", "", f"{_summary(key)} (`{ESTIMATORS[key].__qualname__}`, "
                  f"`{module}`)", "", f"<!-- params:{key} -->", markdown_table(key),
                  f"<!-- /params:{key} -->", ""]
    lines.append(GENERATED_END)
    return "\n".join(lines)


def render_doc(text: str) -> str:
    """``text`` with every ``<!-- params:KEY -->`` ... ``<!-- /params:KEY -->`` block rewritten
    from the declarations, and the generated section (:data:`GENERATED_START`) listing the
    documented keys (:func:`documented_keys`) that have no block elsewhere; everything else
    unchanged."""
    own = set(doc_blocks(_GENERATED.sub("", text)))
    section = _generated_section([k for k in documented_keys() if k not in own])
    if _GENERATED.search(text):
        text = _GENERATED.sub(lambda _m: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    return _BLOCK.sub(
        lambda m: f"{m.group(1)}{markdown_table(m.group('name'))}\n{m.group(4)}", text
    )


def doc_blocks(text: str) -> dict[str, str]:
    """The registry keys whose tables ``text`` holds, with each block's current body."""
    return {m.group("name"): m.group("body") for m in _BLOCK.finditer(text)}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m estimators.core.param_docs [--check] [PATH]``: rewrite (or check) the tables."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("path", nargs="?", type=Path, default=DOC_PATH)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the tables differ from the declarations; write nothing")
    args = parser.parse_args(argv)
    text = args.path.read_text(encoding="utf-8")
    new = render_doc(text)
    if args.check:
        if new != text:
            print(f"{args.path}: parameter tables are out of date; "
                  "run python -m estimators.core.param_docs", file=sys.stderr)
            return 1
        return 0
    if new != text:
        args.path.write_text(new, encoding="utf-8")
        print(f"rewrote {len(doc_blocks(new))} parameter table(s) in {args.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
