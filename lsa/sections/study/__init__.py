"""Section 07: the confirmatory study of the regularizer's mechanism (issue 62), as the
pre-registration (``docs/preregistration.md``) plans it and ``lsa.study`` analyses it. Its
profiles (``study``, ``study-smoke``) run this section only; its claims carry the origin
``study`` and their own families, never counted with the paper's. An incomplete stage is not
analysed (``lsa.study.StudyIncomplete``, one line); a look that does not stop reads H1's p and
nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from lsa import study
from lsa.config import PipelineConfig
from lsa.gates import Gate, gates_table
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.study.claims import study_claims
from lsa.sections.study.tables import base_table, design_table, tests_table

if TYPE_CHECKING:
    from lsa.notebook import Setup


@dataclass
class StudyResult(Result):
    """The study's tables: its design, its bases (gates, stage), its G3 per method, its tests
    (with the sensitivity analyses) and the diverged runs; ``analysis``: ``lsa.study``'s."""

    design: pd.DataFrame | None = None
    bases: pd.DataFrame | None = None
    g3: pd.DataFrame | None = None
    tests: pd.DataFrame | None = None
    diverged: pd.DataFrame | None = None
    claims_table: pd.DataFrame | None = field(default=None, metadata={"saved_as": "claims"})
    analysis: Any = field(default=None, repr=False)


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> StudyResult:
    runs.need("study")
    st, found = pipe.study, runs.study
    g3 = {m: g.passed for m, g in found["g3"].items()}
    analysis = study.analyse(st, found["runs"], found["bases"], g3,
                             pipe.population.exclude_ppl_ratio, found["pilot"])
    claims = study_claims(analysis, st) if analysis.judged else []
    from lsa.claims import claims_table

    result = StudyResult(design=design_table(st), bases=base_table(found["bases"]),
                         g3=gates_table(list(found["g3"].values())),
                         tests=tests_table(analysis) if analysis.judged else None,
                         diverged=analysis.diverged, analysis=analysis, claims=claims,
                         claims_table=claims_table(claims).assign(
                             family=[c["family"] for c in claims],
                             bases=[c["bases"] for c in claims],
                             p_holm=[c["p_holm"] for c in claims]) if claims else None)
    result.metrics.update(look=None if analysis.look is None else {
        "bases": analysis.look.bases, "p": analysis.look.p, "bound": analysis.look.bound,
        "stop": analysis.look.stop}, judged=analysis.judged, bases=analysis.bases,
        kept_runs=found["kept"], premise_failed=analysis.premise_failed)
    return result


def describe(setup: Setup, result: StudyResult) -> str:
    st, a = setup.settings, result.analysis
    text = (f"profile {setup.profile}: {len(a.bases)} bases analysed "
            f"({', '.join(map(str, a.bases))}); stages of {[len(s) for s in st.stage_seeds]} "
            f"bases, {st.stages} planned; {result.metrics['kept_runs']} runs read from kept "
            "blocks")
    if a.look is not None:
        text += "; " + a.look.sentence()
    return text
