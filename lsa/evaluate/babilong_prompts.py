"""The BABILong benchmark's own prompts, for the evaluate design (profiles ``gpu-small`` and
``paper``: the fine-tuning runs evaluated as the paper does, Sec. 5.4, Tables 6-7).

The ``mini`` and ``smoke`` profiles keep the train design (``lsa.jobs.babilong_train``): a model
of a few million parameters cannot follow instructions, so it is fine-tuned on the bare
format and prompted without these parts.

The benchmark (booydar/babilong) keeps, in ``babilong/prompts.py``, a dictionary
``DEFAULT_PROMPTS`` (task -> ``instruction``, ``examples``, ``post_prompt``) and a format string
``DEFAULT_TEMPLATE`` with the fields ``{instruction} {examples} {post_prompt} {context}
{question}``; its evaluation fills the template with the context stripped of surrounding
white space and strips the result. The prompt prose is the benchmark's and is not copied into
this repository: it is read at run time from a local copy of that file, which is *parsed*
(``ast``), never imported or executed. Only module-level assignments whose value is a string,
a string concatenation, an f-string of earlier string names, or a dictionary of those are
evaluated; anything else in the file is ignored.

Where the file is looked for, first found wins: the configured path
(``babilong.prompts_file``), ``$LSA_DATA_DIR/babilong/prompts.py``, ``data/babilong/prompts.py``.
"""

from __future__ import annotations

import ast
import hashlib
import string
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lsa import paths
from lsa.data.babilong import BabilongSample
from lsa.data.books import DataMissingError
from lsa.evaluate.babilong import PromptTemplate
from lsa.files import InputFormatError, bad_input

PROMPT_PARTS = ("instruction", "examples", "post_prompt")
TEMPLATE_FIELDS = frozenset(PROMPT_PARTS + ("context", "question"))
SOURCE = "https://github.com/booydar/babilong (file babilong/prompts.py)"
RAW_URL = "https://raw.githubusercontent.com/booydar/babilong/main/babilong/prompts.py"


class PromptsFormatError(InputFormatError):
    """The prompts file lacks what the evaluation needs, or has it in an unexpected shape."""


def candidate_paths(configured: str | None = None) -> list[Path]:
    """Where the prompts file is looked for, in order."""
    if configured:
        return [Path(configured).expanduser()]
    found = []
    user = paths.data_dir()
    if user is not None:
        found.append(user / "babilong" / "prompts.py")
    found.append(paths.CACHE / "babilong" / "prompts.py")
    return found


def locate_prompts(configured: str | None = None) -> Path:
    """The benchmark's ``prompts.py``; an error naming every place looked at and how to get
    the file when none has it."""
    tried = candidate_paths(configured)
    for path in tried:
        if path.is_file():
            return path
    target = tried[0] if configured else paths.CACHE / "babilong" / "prompts.py"
    raise DataMissingError(
        "the BABILong benchmark's prompts file was not found (looked at: "
        + ", ".join(str(p) for p in tried) + "). It is the benchmark's own file, read at run "
        f"time and never copied into this repository: get it from {SOURCE}, e.g.\n"
        f"    mkdir -p {target.parent} && curl -L -o {target} {RAW_URL}\n"
        "or put it at $LSA_DATA_DIR/babilong/prompts.py, or set babilong.prompts_file to its "
        "path in config/config.yaml.")


class _Unsupported(Exception):
    """An expression the parser does not evaluate (left alone)."""


def _value(node: ast.AST, names: dict[str, Any]) -> Any:
    """The value of a string-valued expression, without executing anything."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        if isinstance(names.get(node.id), str):
            return names[node.id]
        raise _Unsupported(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, names), _value(node.right, names)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        raise _Unsupported("+")
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                if part.conversion != -1 or part.format_spec is not None:
                    raise _Unsupported("f-string conversion or format spec")
                out.append(_value(part.value, names))
            else:
                out.append(_value(part, names))
        return "".join(out)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise _Unsupported("** in a dictionary")
        keys = [_value(key, names) for key in node.keys]  # type: ignore[arg-type]
        return dict(zip(keys, (_value(v, names) for v in node.values)))
    raise _Unsupported(type(node).__name__)


def parse_module(source: str) -> dict[str, Any]:
    """The string and dictionary constants a Python source assigns at module level."""
    names: dict[str, Any] = {}
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        try:
            names[target.id] = _value(value, names)
        except _Unsupported:
            names.pop(target.id, None)  # a later unsupported assignment shadows an earlier one
    return names


@dataclass
class BenchmarkTemplate(PromptTemplate):
    """``PromptTemplate`` filled as the benchmark fills it: the context stripped of surrounding
    white space, and the whole prompt stripped (parts left out leave no blank lines)."""

    def render(self, sample: BabilongSample) -> str:
        return super().render(replace(sample, context=sample.context.strip())).strip()


@dataclass
class BenchmarkPrompts:
    """The prompt parts per task and the template, as read from ``path``."""

    path: Path
    sha256: str
    template: str
    prompts: dict[str, dict[str, str]]

    def template_for(self, task: str, parts: list[str] | tuple[str, ...] = PROMPT_PARTS
                     ) -> BenchmarkTemplate:
        """The prompt of ``task`` with the chosen ``parts`` (the others empty, as the
        benchmark's ``use_instruction`` / ``use_examples`` / ``use_post_prompt`` switches do)."""
        if task not in self.prompts:
            raise PromptsFormatError(f"{self.path}: DEFAULT_PROMPTS has no task {task!r}; it has "
                                     f"{', '.join(sorted(self.prompts))}")
        bad = sorted(set(parts) - set(PROMPT_PARTS))
        if bad:
            raise ValueError(f"prompt part {bad[0]!r}: must be one of {', '.join(PROMPT_PARTS)}")
        chosen = {part: self.prompts[task][part] if part in parts else ""
                  for part in PROMPT_PARTS}
        return BenchmarkTemplate(template=self.template, **chosen)

    def provenance(self, parts: list[str] | tuple[str, ...]) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "parts": list(parts)}


def read_prompts(path: str | Path, tasks: list[str] | None = None) -> BenchmarkPrompts:
    """Parse the benchmark's prompts file; ``tasks`` (if given) must all have prompts."""
    path = Path(path)
    raw = path.read_bytes()
    expected = ("the benchmark's babilong/prompts.py: DEFAULT_TEMPLATE and DEFAULT_PROMPTS "
                "built from string constants")
    if not raw.strip():
        raise bad_input(path, "the file is empty", expected, cls=PromptsFormatError)
    try:
        names = parse_module(raw.decode("utf-8"))
    except SyntaxError as exc:
        raise bad_input(path, f"not Python ({exc.msg})", expected, exc.lineno,
                        cls=PromptsFormatError) from None
    except UnicodeDecodeError as exc:
        raise bad_input(path, f"byte {exc.start} is not UTF-8", expected,
                        raw[:exc.start].count(b"\n") + 1, cls=PromptsFormatError) from None
    template, prompts = names.get("DEFAULT_TEMPLATE"), names.get("DEFAULT_PROMPTS")
    if not isinstance(template, str):
        raise PromptsFormatError(f"{path}: no string DEFAULT_TEMPLATE built from string "
                                 "constants (is it the benchmark's babilong/prompts.py?)")
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    if not fields <= TEMPLATE_FIELDS or not {"context", "question"} <= fields:
        raise PromptsFormatError(f"{path}: DEFAULT_TEMPLATE has the fields {sorted(fields)}; "
                                 f"expected context and question among {sorted(TEMPLATE_FIELDS)}")
    if not isinstance(prompts, dict):
        raise PromptsFormatError(f"{path}: no dictionary DEFAULT_PROMPTS of string constants")
    for task, parts in prompts.items():
        if not isinstance(parts, dict) or not all(isinstance(parts.get(p), str)
                                                  for p in PROMPT_PARTS):
            raise PromptsFormatError(f"{path}: DEFAULT_PROMPTS[{task!r}] must map "
                                     f"{', '.join(PROMPT_PARTS)} to strings")
    missing = [t for t in tasks or [] if t not in prompts]
    if missing:
        raise PromptsFormatError(f"{path}: DEFAULT_PROMPTS has no prompts for {missing}")
    kept = {t: {p: parts[p] for p in PROMPT_PARTS} for t, parts in prompts.items()}
    return BenchmarkPrompts(path, hashlib.sha256(raw).hexdigest(), template, kept)
