"""lsa.headline: "What this replication found", generated from a claims table."""

import math

from lsa.claims import Claim, claims_table, judged, with_holm
from lsa.gates import Gate
from lsa.headline import FINDING, MOST, headline


def claim(id, claim_text, origin="paper", kind="paper", **kw):
    base = dict(section="s", paper="PPL 6.01 -> 5.91", grade="B", ours="o", verdict="not run")
    base.update(kw)
    return Claim(id=id, claim=claim_text, kind=kind, origin=origin, **base).to_dict()


def test_the_headline_by_hand():
    eabf = claim("S5.eabf", "CE + 0.1 misalign lowers perplexity (eabf)", method="eabf",
                 **judged(0.055, 0.083, -1, math.log(5.91 / 6.01), n=11))
    clex = claim("S5.clex", "CE + 0.1 misalign lowers perplexity (clex)", method="clex",
                 **{**judged(-0.05, -0.01, -1, -0.04, n=3), "verdict": "premise not met",
                    "evidence": "x [verdict if the premise held: agrees]"})
    rows = [eabf, clex,
            claim("T1.6", "SCE ranks as L2 does", origin="control", kind="control",
                  verdict="passes", ours="Spearman +0.9"),
            claim("A2.1", "alpha 0.3 beats 0.1 (eabf)", origin="extension",
                  **judged(-0.2, -0.1, -1, None, n=3)),
            claim("A4.1", "CE on both windows (eabf)", origin="control", kind="control",
                  verdict="unclear")]
    gates = [Gate("G1", "q", 1.0, 0.9, 1.1, 0.5, True, ""),
             Gate("G3.clex", "q", 0.2, 0.1, 0.3, 0.5, False, "")]
    text = headline(with_holm(claims_table(rows)), gates, "mini",
                    {"label_change": "audit 3: 12 % of positions"})
    lines = text.splitlines()
    assert lines[0] == "## What this replication found (`mini`)"
    line = next(x for x in lines if x.startswith("- S5.eabf"))
    # the paper's -0.017 nats against our [+0.055, +0.083]: the other side of 0
    assert "**disagrees**; ours [+0.055, +0.083], the paper PPL 6.01 -> 5.91" in line
    assert "Holm p" in line
    line = next(x for x in lines if x.startswith("- S5.clex"))
    assert "**premise not met** (G3.clex 0.2 [0.1, 0.3] against 0.5" in line
    assert "its numbers would read *agrees*" in line
    assert "audit 3: 12 % of positions" in text                       # labels change
    assert "T1.6, SCE ranks as L2 does: **passes** (Spearman +0.9)" in text
    assert "is the gain the compute?: not measured in this profile" in text
    ours = text.split("**Beyond the paper (ours)**")[1]
    assert "A2.1" in ours and "A4.1" not in ours                      # unclear is not decided


def test_at_most_fifteen_lines_of_the_papers_claims():
    rows = [claim(f"X{i}", f"c{i}", **judged(0.1, 0.2, +1, 0.15, n=3)) for i in range(20)]
    text = headline(claims_table(rows))
    assert sum(x.startswith("- X") for x in text.splitlines()) == MOST
    assert "... and 5 more" in text


def test_claims_without_an_interval_take_one_line_per_section():
    """Threshold checks (no interval) are counted apart, after the claims judged on an
    interval, and never cut by the fifteen lines (issue 61)."""
    rows = [claim(f"S3.{i}", f"c{i}", section="Sec. 3", verdict=v, ours="by seed")
            for i, v in enumerate(["agrees", "agrees", "disagrees"], start=1)]
    rows += [claim(f"X{i}", f"c{i}", **judged(0.1, 0.2, +1, 0.15, n=3)) for i in range(20)]
    text = headline(claims_table(rows))
    checks = ("- Sec. 3, 3 threshold checks without an interval (a majority of seeds, or one "
              "seed; not counted with the claims above): 2 agrees (S3.1, S3.2), 1 disagrees "
              "(S3.3)")
    assert checks in text and "- S3.1" not in text
    assert "(20 judged on an interval, the metric's and the regularizer's first, and 3 " \
           "threshold checks;" in text
    lines = text.splitlines()
    assert lines.index(checks) > max(i for i, x in enumerate(lines) if x.startswith("- X"))


def test_the_headline_says_what_the_fine_tuning_verdicts_rest_on():
    """One base model: the verdicts are about it; several: Section 5.2's paper claims are on
    the t over base means; unknown (an older snapshot): nothing said."""
    rows = [claim("S5.eabf", "c", **judged(0.05, 0.08, -1, -0.017, n=3))]
    one = headline(claims_table(rows), bases={"count": 1, "methods": []})
    assert "*On one base model*" in one and "about this base" in one
    three = headline(claims_table(rows), bases={"count": 3, "methods": ["eabf"],
                                                "ablation": True})
    assert ("*On 3 base models*: S5.eabf and Section 5.3's comparisons that ran on every base "
            "(core, equal compute, parts) are judged on the t interval") in three
    from lsa.config import load_config
    from lsa.sections.report import bases_of

    assert bases_of(load_config(profile="mini")) == {"count": 1, "methods": [],
                                                     "ablation": False}
    assert bases_of(load_config(profile="mini-full")) == {"count": 3, "methods": ["eabf"],
                                                          "ablation": True}
    assert "base model*" not in headline(claims_table(rows))
    rests = headline(claims_table([{**rows[0], "rests_on": "base model"}]))
    assert "**disagrees** (rests on base model)" in rests


def test_an_objections_answer_carries_its_p_and_says_which_family():
    """An objection's row is the review's claim, not the paper's: its own p, and where it has
    no Holm p, that it is outside the paper's Holm family (issue 61)."""
    from lsa.headline import _p_note

    assert _p_note({"p": "0.0204", "p_holm": ""}) == "; p 0.02, outside the paper's Holm family"
    assert _p_note({"p": 0.0204, "p_holm": 0.1}) == "; p 0.02, Holm p 0.1"
    assert _p_note({"p": ""}) == _p_note({}) == _p_note({"p": "nan"}) == ""


def test_threshold_checks_are_counted_apart_from_the_claims_judged_on_an_interval():
    """Section 3's threshold checks never add to the interval claims' "agrees" (issue 61)."""
    from lsa.claims import counts_sentence, verdict_counts

    rows = [claim(f"S3.{i}", f"c{i}", section="Sec. 3", verdict="agrees", ours="by seed")
            for i in (1, 2)]
    rows += [claim("T1.1", "c", **judged(-0.5, -0.1, -1, -0.85, n=10)),
             claim("S3.3", "c", section="Sec. 3", verdict="not run", ours="-")]
    counts, apart = verdict_counts(claims_table(rows))
    assert sum(counts.values()) == 2 and counts["agrees"] == 0 and counts["not run"] == 1
    assert list(apart) == ["threshold"] and apart["threshold"] == {"agrees": 2}
    text = counts_sentence(counts, apart)
    assert text.index("judged on an interval**") < text.index("**2 threshold checks")


def test_our_exploratory_finding_is_labelled_and_comes_from_its_claims():
    """The project's own finding (``FINDING``) is its own part, labelled as ours and not yet
    confirmed, each line the claim's id, verdict and numbers; a profile without those claims
    has no such part."""
    texts = [text for text, _ in FINDING]
    rows = [claim("A1.13", texts[0], origin="control", kind="control", verdict="lowers",
                  ours="misalignment 8.2 -> 6.7, paired diff -1.48 [-1.59, -1.37]"),
            claim("A1.36", texts[4], origin="control", kind="control", verdict="unclear",
                  ours="NLL 4.86 -> 4.71, paired diff -0.149 [-0.465, +0.168]")]
    text = headline(claims_table(rows))
    part = text.split("**Our own finding, exploratory, not yet confirmed**")[1]
    assert "not a claim of the paper" in part and "docs/preregistration.md" in part
    assert (f"- {FINDING[0][1]}: A1.13 **lowers** (misalignment 8.2 -> 6.7, paired diff -1.48 "
            "[-1.59, -1.37])") in part
    assert f"- {FINDING[4][1]}: A1.36 **unclear** (NLL 4.86" in part
    assert part.index("A1.13") < part.index("A1.36")                   # FINDING's order
    assert "Our own finding" not in headline(claims_table([rows[0] | {"claim": "other"}]))
    # once the study has judged, the finding is its pilot (its outcome is the study's part)
    for status, done in [(None, False), ({"profile": "study", "section": None}, False),
                         ({"profile": "study", "section": {"judged": False}}, False),
                         ({"profile": "study", "section": {"judged": True}}, True)]:
        text = headline(claims_table(rows), study=status)
        assert ("not yet confirmed" in text) is not done
        assert ("the pilot of the confirmatory study below" in text) is done


def test_the_finding_names_claims_the_published_mini_full_makes():
    """Each claim of ``FINDING`` is one the ablation section writes, word for word: the
    published ``mini-full`` (3 bases) holds every one."""
    import pandas as pd

    from lsa import paths

    claims = set(pd.read_csv(paths.ROOT / "docs" / "results" / "mini-full" / "claims.csv")["claim"])
    assert [text for text, _ in FINDING if text not in claims] == []


# --- the confirmatory study's part (lsa.headline.study_lines, from lsa.kept.status) ----------


def test_the_study_part_while_it_is_open_names_where_it_stands_and_reads_no_outcome(tmp_path,
                                                                                   monkeypatch):
    from lsa import files, kept, published
    from lsa.headline import study_lines

    monkeypatch.setattr(published, "folder", lambda profile: tmp_path / profile)
    assert kept.status() is None and study_lines(None) == []  # nothing kept: no part
    files.write_json(tmp_path / "study" / "MANIFEST.json", {"bases": {}, "files": {}})
    status = kept.status()
    assert status == {"profile": "study", "section": None}
    text = "\n".join(study_lines(status))
    assert "`docs/results/study/README.md`" in text and "no outcome is read" in text
    assert not any(ch.isdigit() for ch in text.replace("section 07", ""))  # no count to go stale
    # once section 07's metrics are published beside the kept blocks, they are what it reads
    files.write_packed(tmp_path / "study" / "sections" / kept.SECTION / "metrics.json",
                       b'{"judged": false, "claims": []}')
    assert kept.status()["section"] == {"judged": False, "claims": []}
    from lsa.sections.study.claims import SECTION  # the section kept.status reads is section 07

    assert kept.SECTION == SECTION


def test_the_study_part_once_judged_is_its_claims_with_no_typed_number():
    """Each confirmatory test's line is its claim's id, family, verdict and sentence (section
    07's own claims on synthetic numbers); every number in the part comes from the claims or
    the look."""
    import re

    from support.study import base_table, small_config, synthetic

    from lsa import study
    from lsa.headline import FAMILIES, study_lines
    from lsa.sections.study.claims import study_claims

    cfg = small_config()
    analysis = study.analyse(cfg, synthetic(cfg, [1, 2, 3, 4], sd=0.002),
                             base_table([1, 2, 3, 4]), {m: True for m in cfg.methods}, 3.0)
    claims = study_claims(analysis, cfg)
    look = {"bases": 4, "p": 0.0123456, "bound": 0.00271828, "stop": True}
    section = {"judged": True, "bases": [1, 2, 3, 4], "look": look, "claims": claims}
    lines = study_lines({"profile": "study", "section": section})
    for c in claims:
        (line,) = [x for x in lines if x.startswith(f"- {c['id']} ")]
        assert f"({FAMILIES[c['family']]})" in line and f"**{c['verdict']}**" in line
        assert line.endswith(f"({c['ours']})")
    assert any("its one look, at 4 bases: H1's p 0.0123 against the boundary 0.00272: the "
               "study stops there" in x for x in lines)
    assert any(x.startswith("- on 4 base models") for x in lines)
    rest = "\n".join(lines)
    for c in claims:  # a test's text names its arms ("entropy 0.1"): the study's, not typed here
        rest = rest.replace(c["ours"], "").replace(c["claim"], "")
    rest = rest.replace("0.0123", "").replace("0.00272", "")
    assert not re.search(r"\d*\.\d+|\d+\s*%", rest), rest
    # a look that does not stop reads nothing else: no claim line
    going_on = study_lines({"profile": "study", "section": {
        "judged": False, "bases": [1, 2], "claims": [], "look": {**look, "stop": False}}})
    assert any("goes on to its second stage" in x for x in going_on)
    assert not any(x.startswith("- ST.") for x in going_on)
