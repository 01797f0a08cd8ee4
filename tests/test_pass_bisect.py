"""`tools/gpu_pass_bisect.py` leaves out exactly one pass of a pipeline (commas inside options kept)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "gpu_pass_bisect", Path(__file__).resolve().parents[1] / "tools" / "gpu_pass_bisect.py")
bisect = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bisect)


def test_split_keeps_options_and_nested_pipelines_whole() -> None:
    p = "ansor-auto-unroll{max-unrolled-work=2048},canonicalize,gpu.module(convert-gpu-to-nvvm{a=1,b=2}),cse"
    assert bisect.split_pipeline(p) == ["ansor-auto-unroll{max-unrolled-work=2048}", "canonicalize",
                                        "gpu.module(convert-gpu-to-nvvm{a=1,b=2})", "cse"]


def test_without_drops_only_the_named_pass() -> None:
    p = "loop-invariant-code-motion,ansor-gpu-hoist-accumulators,ansor-gpu-pipeline-shared-copies"
    assert bisect.without(p, "ansor-gpu-hoist-accumulators") == \
        "loop-invariant-code-motion,ansor-gpu-pipeline-shared-copies"
    assert bisect.without("ansor-auto-unroll{max-unrolled-work=8},cse", "ansor-auto-unroll") == "cse"
    assert bisect.without("ansor-gpu-swizzle-blocks{group=8}", "ansor-gpu-swizzle-blocks") == ""
    assert bisect.without("canonicalize,cse", "ansor-gpu-hoist-accumulators") == "canonicalize,cse"


def test_every_skippable_pass_is_one_the_lowering_runs() -> None:
    src = (Path(__file__).resolve().parents[1] / "python" / "ansor" / "targets" / "cuda" / "lowering.py").read_text()
    for name in bisect.SKIPPABLE:
        assert name.replace("infer-access-alignment", "infer_access_alignment") in src, name
