""""What this replication found": the headline a reader meets first (``RESULTS.md``, notebook
06, the results index), generated from a claims table (``lsa.claims``) and the premise gates,
never written by hand.

Five parts: the paper's claims as it ran them (origin ``paper``), one line each with the
verdict, our interval, the paper's number and Holm's adjustment, at most ``MOST`` lines (a
claim whose premise failed names the gates that failed with their numbers and the verdict its
numbers would give); the answers to the paper's three known objections, from the claims that
answer them; what this replication found beyond the paper (the decided outcomes of the
project's controls and the extensions), labelled as ours; and the project's own exploratory
finding (``FINDING``), from the controls that carry its numbers, labelled as ours and not yet
confirmed (the study's pilot, once the study has judged); and the confirmatory study that
tests it (``study_lines``): how it stands while it is open, its outcome from its own claims
once they are published.
"""

from __future__ import annotations

import math
import re
from typing import Any

from lsa import kept
from lsa.claims import HELD_NOTE
from lsa.stats import EDGE, NOT_RUN, PREMISE_NOT_MET

#: at most this many lines for the paper's claims
MOST = 15
#: the paper's three known objections (the reviews), each with the ids of the claims that
#: answer it, in the order they are tried (the first one present answers), or the key of a
#: section's sentence that does (``answers``: Section 4.1's audit 3 is a table, not a claim)
OBJECTIONS: dict[str, tuple[str, ...]] = {
    "Labels change when the context is cut (the theorem assumes they do not)":
        ("label_change",),
    "SCE is not the L2 distance the theory bounds": ("T1.6",),
    "The regularized run costs more than CE: is the gain the compute?": ("A5.1", "A5.2"),
}
#: the project's own exploratory finding (issue 62's pilot: at the paper's alpha the regularizer
#: sharpens more than it aligns; its alignment part alone may help beyond the window at a cost
#: inside it), as the claims of Section 5.3's item 1 on EABF that carry its numbers: each claim
#: by what it says (ids differ between profiles; ``tests/unit/test_headline.py`` checks the texts
#: against the published ``mini-full``), with what it shows. SCE = Jeffreys + twice the mean
#: entropy (``docs/methods.md``).
FINDING: tuple[tuple[str, str], ...] = (
    ("CE + 0.1 x SCE: its effect on misalignment (eabf)",
     "the paper's regularizer at its alpha lowers the metric (against CE-only)"),
    ("CE + 0.1 x SCE: its effect on jeffreys (eabf)", "of which its alignment part, Jeffreys"),
    ("CE + 0.1 x SCE: its effect on mean_entropy (eabf)",
     "and its sharpness part, the mean entropy (the metric holds it twice)"),
    ("CE + 0.1 x entropy against eabf CE (both windows) (longest-window NLL)",
     "the sharpness part alone, against the same-cost control: NLL at the longest window"),
    ("CE + 1 x Jeffreys against eabf CE (both windows) (longest-window NLL)",
     "the alignment part alone (alpha 1), against the same-cost control: the same NLL"),
    ("CE + 1 x Jeffreys: its effect on the copy NLL at 1x l_train (use of far context; eabf)",
     "its cost inside the window (against CE-only): copy NLL at 1x"),
)
#: the outcomes of the project's controls that decide something (not "unclear")
DECIDED = ("helps", "hurts", "lowers", "raises", "passes", "fails")

_HELD = re.compile(re.escape(HELD_NOTE).replace(re.escape("{}"), r"([^\]]+)"))


def _p_note(row: dict) -> str:
    """``; p 0.02, outside the paper's Holm family`` for an objection's row with a p (the
    objections are the reviews', not the paper's claims: not in its Holm family), with its
    Holm p where it has one."""
    try:
        p = float(row.get("p"))
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(p):
        return ""
    try:
        holm = float(row.get("p_holm"))
    except (TypeError, ValueError):
        holm = math.nan
    if math.isfinite(holm):
        return f"; p {p:.2g}, Holm p {holm:.2g}"
    return f"; p {p:.2g}, outside the paper's Holm family"


def _short(text: str, most: int = 160) -> str:
    """``text`` cut to ``most`` characters (the full text is in the claims tables)."""
    return text if len(text) <= most else text[:most - 1].rstrip() + "…"


def _number(value: float) -> str:
    return f"{value:+.3g}"


def _interval(row: dict[str, Any]) -> str:
    low, high = row.get("low"), row.get("high")
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    return f"[{_number(low)}, {_number(high)}]"


def _verdict(row: dict[str, Any]) -> str:
    edge = row.get("edge")
    mark = " (edge)" if edge is not None and math.isfinite(edge) and edge < EDGE else ""
    rests = row.get("rests_on")
    if isinstance(rests, str) and rests:
        mark += f" (rests on {rests})"
    return f"**{row['verdict']}**{mark}"


def _failed_gates(gates, method: str) -> str:
    """The gates of ``method``'s premise that did not pass, each with its number."""
    out = []
    for g in gates or []:
        needed = g.gate in ("G1", "G2") or g.gate == f"G3.{method}"
        if needed and g.passed is not True:
            value = f"{g.value:.3g} [{g.low:.3g}, {g.high:.3g}]" if math.isfinite(g.value) \
                else "not computable"
            bar = f" against {g.threshold:g}" if g.threshold is not None else ""
            out.append(f"{g.gate} {value}{bar}")
    return "; ".join(out) or "its gates"


def paper_line(row: dict[str, Any], gates=None) -> str:
    """One line of the paper's claims: id, claim, verdict, our interval, the paper's value."""
    text = f"- {row['id']} {row['claim']}: {_verdict(row)}"
    if row["verdict"] == PREMISE_NOT_MET:
        held = _HELD.search(str(row.get("evidence", "")))
        why = (_failed_gates(gates, row.get("method") or "") if gates
               else str(row.get("evidence", "")).split(";")[0])
        return (f"{text} ({why}; its numbers would read "
                f"*{held.group(1) if held else 'nothing'}*, {_interval(row)})")
    if row["verdict"] == NOT_RUN:
        return text
    interval = _interval(row)
    text += f"; ours {row['ours'] if interval == 'no interval' else interval}, the paper " \
            f"{row['paper']}"
    p_holm = row.get("p_holm")
    if p_holm is not None and isinstance(p_holm, float) and math.isfinite(p_holm):
        text += f"; Holm p {p_holm:.3g}"
    return text


def bases_line(bases: dict[str, Any] | None) -> str:
    """What the fine-tuning verdicts rest on (``bases``: ``count``, the pretrained base models;
    ``methods``, those whose Section 5.2 paper claim runs on each, ``finetune.bases``;
    ``ablation``, whether Section 5.3's core comparisons, compute and parts do,
    ``ablation.base_seeds``): one base model, or several; "" where unknown (an older
    snapshot)."""
    if not bases or not bases.get("count"):
        return ""
    if bases["count"] == 1:
        return ("*On one base model*: every fine-tuning verdict here compares runs from one "
                "pretrained base model, whose seeds vary the fine-tuning only, so it is about "
                "this base, not about the method in general (`finetune.bases` adds "
                "independently pretrained ones).")
    methods = bases.get("methods") or []
    parts = ([", ".join(f"S5.{m}" for m in methods)] if methods else []) + (
        ["Section 5.3's comparisons that ran on every base (core, equal compute, parts)"]
        if bases.get("ablation") else [])
    return (f"*On {bases['count']} base models*: " + " and ".join(parts) + " are judged on "
            "the t interval over the base models' means (seeds nested in bases); every other "
            "fine-tuning verdict is about the pipeline's base model.")


def headline(table, gates=None, profile: str = "", answers: dict[str, str] | None = None,
             bases: dict[str, Any] | None = None, study: dict[str, Any] | None = None) -> str:
    """The parts of the module's docstring, as markdown, from ``table`` (a claims table:
    ``lsa.claims.claims_table``, with ``p_holm`` where the report computed it), the premise
    ``gates``, the sections' sentences that answer an objection (``answers``), the
    independently pretrained base models the fine-tuning claims rest on (``bases_line``) and
    the confirmatory study's state (``lsa.kept.status``; ``study_lines``)."""
    answers = answers or {}
    rows = table.to_dict(orient="records")
    paper = [r for r in rows if r.get("origin") == "paper"]
    # claims judged without an interval (Section 3's majority of seeds) one line per section
    lines, by_section = [], {}
    for r in paper:
        low = r.get("low")
        if low is None or not math.isfinite(low):
            if r["verdict"] not in (PREMISE_NOT_MET, NOT_RUN):
                by_section.setdefault(r["section"], []).append(r)
                continue
        lines.append((r["verdict"] == NOT_RUN, paper_line(r, gates)))
    checks = []  # the threshold checks after the claims judged on an interval, never cut
    for section, found in by_section.items():
        counts: dict[str, list[str]] = {}
        for r in found:
            counts.setdefault(r["verdict"], []).append(r["id"])
        words = ", ".join(f"{len(ids)} {v}" + (f" ({', '.join(ids)})" if len(ids) <= 3 else "")
                          for v, ids in counts.items())
        checks.append(f"- {section}, {len(found)} threshold checks without an interval (a "
                      f"majority of seeds, or one seed; not counted with the claims above): "
                      f"{words}")
    shown = [text for _, text in sorted(lines, key=lambda x: x[0])][:MOST]
    where = f" (`{profile}`)" if profile else ""
    n_checks = sum(len(found) for found in by_section.values())
    out = [f"## What this replication found{where}", "",
           f"**The paper's claims as it ran them** ({len(paper) - n_checks} judged on an "
           f"interval, the metric's and the regularizer's first"
           + (f", and {n_checks} threshold checks" if n_checks else "")
           + "; methods and lengths the paper ran, in this testbed's scale; the interval is "
           "ours, 95 %):", ""]
    out += shown or ["- none in this profile"]
    if len(lines) > len(shown):
        out.append(f"- ... and {len(lines) - len(shown)} more lines (the tables below)")
    out += checks
    if bases_line(bases):
        out += ["", bases_line(bases)]
    by_id = {r["id"]: r for r in rows}
    out += ["", "**The paper's three known objections**:", ""]
    for objection, ids in OBJECTIONS.items():
        found = next((by_id[i] for i in ids if i in by_id), None)
        said = next((answers[i] for i in ids if answers.get(i)), None)
        answer = (f"{found['id']}, {found['claim']}: **{found['verdict']}** "
                  f"({_short(found['ours'])}{_p_note(found)})" if found
                  else said or "not measured in this profile")
        out.append(f"- {objection}: {answer}")
    ours = [r for r in rows if (r.get("origin") == "control" and r["verdict"] in DECIDED)
            or (r.get("origin") == "extension" and r["verdict"] not in (NOT_RUN, PREMISE_NOT_MET)
                and str(r["verdict"]).startswith(("agrees", "disagrees")))]
    out += ["", f"**Beyond the paper (ours)**: {len(ours)} decided outcomes of the project's "
            "controls and extensions" + (", the first five in the order of the sections:"
                                         if len(ours) > 5 else ":"), ""]
    out += [f"- {r['id']} {r['claim']}: **{r['verdict']}** ({_short(r['ours'])})"
            for r in ours[:5]]
    if not ours:
        out.append("- none")
    out += finding_lines(rows, judged=kept.judged(study))
    out += study_lines(study)
    return "\n".join(out)


def finding_lines(rows: list[dict[str, Any]], judged: bool = False) -> list[str]:
    """The project's exploratory finding (``FINDING``) from the rows that carry it, each with
    its id, verdict and numbers; none where the profile has none of them. Its label says
    "not yet confirmed" until the confirmatory study has ``judged`` (then: the pilot, which
    the study's part below tests; its outcome is there, never restated here)."""
    by_claim = {r["claim"]: r for r in rows}
    found = [(what, by_claim[text]) for text, what in FINDING if text in by_claim]
    if not found:
        return []
    label = ("**Our own finding, exploratory: the pilot of the confirmatory study below**"
             if judged else "**Our own finding, exploratory, not yet confirmed**")
    tested = ("the pre-registered study below tested it on new base models"
              if judged else "a pre-registered study on new base models tests it")
    return ["", f"{label} (the project's reading of "
            "its controls on EABF, not a claim of the paper; Jeffreys' alpha 1 was chosen on the "
            f"first base model's runs; {tested}: "
            "`docs/preregistration.md`):", "",
            *[f"- {what}: {r['id']} **{r['verdict']}** ({_short(r['ours'])})"
              for what, r in found]]


#: how the headline names a study test's family (``lsa.study``'s ``Test.family``)
FAMILIES = {"primary": "primary", "secondary": "secondary, one Holm family",
            "paper": "the paper's comparison on the study's bases, a family of three"}


def study_lines(status: dict[str, Any] | None) -> list[str]:
    """The confirmatory study's part (``status``: ``lsa.kept.status``): while it is open, where
    its kept blocks are and that no outcome is read; once section 07's metrics are published,
    its look and each confirmatory test's line from its claim (id, family, verdict and the
    sentence of its numbers, ``lsa.sections.study.claims.outcome_sentence``). No number is
    typed here: each comes from the claims or the look (``tests/unit/test_headline.py``)."""
    if not status:
        return []
    profile = status["profile"]
    out = ["", "**The confirmatory study (ours, pre-registered)**: the project's finding "
           "(sharpening against alignment) tested on new base models, as "
           "`docs/preregistration.md` planned it before the study's first run, reported apart "
           f"from the paper's claims (section 07, profile `{profile}`):", ""]
    section = status.get("section")
    if section is None:
        return out + ["- open: its kept blocks and how far each stage is are in "
                      f"`docs/results/{profile}/README.md`; no outcome is read before its "
                      "first stage is in"]
    look = section.get("look")
    if look:
        out.append(f"- its one look, at {look['bases']} bases: H1's p {look['p']:.3g} against "
                   f"the boundary {look['bound']:.3g}: "
                   + ("the study stops there" if look["stop"]
                      else "it goes on to its second stage, and nothing else is read"))
    claims = [c for c in section.get("claims", []) if c.get("origin") == "study"]
    if section.get("judged") and claims:
        out.append(f"- on {len(section.get('bases', []))} base models, each comparison paired "
                   "within base:")
        out += [f"- {c['id']} ({FAMILIES.get(c.get('family'), c.get('family'))}) {c['claim']}: "
                f"**{c['verdict']}** ({c['ours']})" for c in claims]
    return out
