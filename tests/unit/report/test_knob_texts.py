"""The report's words for the bundled Horovod knob studies and for what W is in each trace:
said by the framework owning the knobs (Framework.knob_studies) and by each trace format's
registry line, and rendered as they were when the report spelled them itself (issue #30)."""

from __future__ import annotations

from hpcscale.report.sections.knobs import study_text
from tests.unit.report.test_trace_source import HVD, HVD_RUNS, NAN, _run, _sections

# the texts as the report spelled them before they moved behind the seams
FUSION = "Horovod tensor fusion: HOROVOD_CYCLE_TIME (ms) x HOROVOD_FUSION_THRESHOLD (MB)."
PRECISION = "FP16 = Horovod fp16 compression of the gradients; MP = Keras mixed precision."
HIERARCHICAL = "HOROVOD_HIERARCHICAL_ALLREDUCE=1 reduces within a node first, then across nodes."
OVERLAP = (
    "From the Horovod timeline, per epoch: Computation = T − C (epoch time minus "
    "overall communication), Only communication = C − W, Overlap % = W / T, where W is "
    "the waits unioned in time inside communication. In a Horovod timeline W is wait for "
    "data and wait for other tensor data (they overlap: in a fused batch one tensor waits "
    "for the others while another still waits for its data, so their sum would count that "
    "time twice); CPU timelines record no waits, so there Only communication = C. In a "
    "PyTorch profiler trace W is each rank's wait for the others (each collective matched "
    "across ranks; unknown, and left empty, where no reliable match exists). The three "
    "percentages add up to 100."
)
NO_SHARE = (
    " No communication share is measured without a trace (a Horovod timeline for Horovod runs, "
    "PyTorch profiler traces for DDP runs): record it with `collect: {timeline: true}` in the "
    "campaign and read it with `collect --timeline`."
)


def _knob_runs(**knob: object) -> list[dict]:
    """HVD_RUNS' 2-rank run, and the same with `knob` set (4.5 s, 1 s of communication)."""
    return [HVD_RUNS[1], _run("h3", "horovod", 2, 4.5, 1.0, trace_source=HVD, **knob)]


def test_the_knob_studies_are_worded_as_before() -> None:
    fusion = [
        _run(f"f{mb}", "horovod", 2, 6.0 - mb / 64, 1.0, trace_source=HVD,
             fusion_threshold_mb=mb, cycle_time_ms=5.0)
        for mb in (16, 64)
    ]  # fmt: skip
    assert _sections(fusion)["fusion"].text[0] == FUSION
    assert _sections(_knob_runs(fp16_allreduce=True))["precision"].text[0] == PRECISION
    hier = _sections(_knob_runs(hierarchical_allreduce=True))["hierarchical"]
    assert hier.text[0] == HIERARCHICAL


def test_a_study_no_framework_words_says_nothing() -> None:
    assert study_text("fusion") == [FUSION]
    assert study_text("no such study") == []


def test_the_overlap_and_no_trace_texts_are_worded_as_before() -> None:
    assert _sections(HVD_RUNS)["overlap"].text[0] == OVERLAP
    bare = [{**r, "comm_s": NAN, "trace_source": ""} for r in HVD_RUNS]
    assert sum(t.endswith(NO_SHARE) for t in _sections(bare)["efficiency"].text) == 1
