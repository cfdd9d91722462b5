"""What the tests of published snapshots share: JSON equality with NaN as None, and the rows
the analysis has moved since the snapshots were published."""

from __future__ import annotations

import math


def same_json(a, b) -> bool:
    """Equal as JSON writes them (NaN and None alike)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    return all(missing) or (not any(missing) and a == b)


#: the sections whose runs a published snapshot holds (Section 3's grid is published without
#: its run files; the report reads the others' claims), re-analysed by the tests
REANALYSED = {"mini": ("02_misalignment_correlation", "03_regularized_finetuning",
                       "04_ablations", "05_babilong"),
              "study": ("07_mechanism_study",)}
REANALYSED["mini-full"] = REANALYSED["mini"]


def reanalyse(profile: str) -> dict:
    """The claims (under the report's one verdict rule), gates and section metrics (timings
    aside) of ``profile``'s published snapshot re-analysed in this process (set
    ``LSA_OUTPUT_ROOT`` to an empty folder and unset ``LSA_DATA_DIR`` first: nothing is made,
    nothing saved), as JSON gives them back."""
    import json

    from lsa.notebook import open_section
    from lsa.sections import drive
    from support import stable

    out: dict = {"claims": [], "gates": {}, "metrics": {}}
    for key in REANALYSED[profile]:
        setup = open_section(key, profile=profile)
        assert setup.snapshot is not None or profile == "study", key
        result = drive(setup)
        out["claims"] += result.claims
        out["gates"][key] = result.metrics.get("gates")
        out["metrics"][key] = stable(result.metrics)
    if profile != "study":  # the report's one verdict rule over the sections' claims
        from lsa.claims import claims_table, with_family_rule, with_holm

        table = with_family_rule(with_holm(claims_table(out["claims"])))
        out["claims"] = table.to_dict(orient="records")
    return json.loads(json.dumps(out, default=str))


#: ``reanalyse`` in a new process, writing its result and the kernels that process ran
#: (``lsa.kernels.report``) as JSON to ``sys.argv[2]``
REANALYSE_SCRIPT = """
import json, sys
from support.snapshots import reanalyse
from lsa import kernels
found = reanalyse(sys.argv[1])
json.dump({"result": found, "kernels": kernels.report()}, open(sys.argv[2], "w"))
"""
