"""The CUDA sketches' compiled validity checker and precomputed sampler agree with the plain code.

`rules._GpuChecker` (through `rules._checker`) must give the verdict of `rules._why_invalid(...)
is None`, and `rules.sample_gpu` (through `rules._SamplePlan`) must draw, seed for seed, what
`rules._sample_gpu_reference` draws when the latter checks plainly, with the same random calls
(the generator left in the same state). Checked on random, factorized, sampled and mutated
annotations of diverse GPU sketches (prime and ragged extents, windowed convolutions, batch
matmuls, a fused consumer tile, 64-bit elements, a broadcast producer, no reduction), with
strict_threads on and off. The annotations are built from whatever knobs and splits a sketch
has, so a new knob checked on both sides needs no change here. No GPU needed."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping

import ansor.targets.cuda.rules as R
import pytest
from ansor.core.task import create_task
from ansor.frontend import workloads
from ansor.space.schedule import SamplingError, factorizations, sizes_from_factors
from ansor.targets import generate_sketches
from test_gpu_rule_gaps import _se_gate  # a broadcast producer (squeeze-excitation gate)

# name -> source: the fast set, one of each structure the checker distinguishes
FAST: dict[str, Callable[[], str]] = {
    "matmul-509x1021x257": lambda: workloads.get("matmul-509x1021x257"),  # prime: always ragged
    "matmul-1024": lambda: workloads.get("matmul-1024"),
    "c2d-1x97x97x13x29x3x1x1": lambda: workloads.get("c2d-1x97x97x13x29x3x1x1"),  # windowed, ragged rows
    "bmm-3x33x97x65": lambda: workloads.batch_matmul(3, 33, 97, 65),
    "mbg-100x200x48": lambda: workloads.matmul_bias_gelu(100, 200, 48),  # fused consumer tile in shared
    "matmul-f64": lambda: workloads.matmul(64, 96, 80, dtype="f64"),  # 64-bit: registers count twice
    "se-48x1152x3x3": lambda: _se_gate(48, 1152, 3, 3),  # broadcast producer, no reduction
    "c3d-1x16x56x56x64x64x1x1x0": lambda: workloads.get("c3d-1x16x56x56x64x64x1x1x0"),  # 4 reduction dims
    "dep-1x112x112x32x3x1x1": lambda: workloads.get("dep-1x112x112x32x3x1x1"),
    "convlayer-1x56x56x64x128x3x2x1": lambda: workloads.get("convlayer-1x56x56x64x128x3x2x1"),
}


def _slow_sources() -> dict[str, Callable[[], str]]:
    """Every built-in workload (multi-kernel tasks through their parts) plus a few extras."""
    from test_gpu import _SCALE_TRANSPOSE
    from test_gpu_rule_gaps import _shuffle

    out: dict[str, Callable[[], str]] = {n: functools.partial(workloads.get, n) for n in workloads.BUILTIN}
    out.update(FAST)
    out["se-256x64x4x4"] = lambda: _se_gate(256, 64, 4, 4)
    out["shuffle-2x96x3x3"] = lambda: _shuffle(2, 96, 3, 3)
    out["scale_transpose"] = lambda: _SCALE_TRANSPOSE
    out["mlp-64x256x4"] = lambda: workloads.get("mlp-64x256x4")
    return out


@functools.cache
def _gpu_sketches(name: str, src: Callable[[], str]) -> tuple[R.GpuSketch, ...]:
    """The task's GPU sketches, those inside multi-kernel sketches' parts included."""
    task = create_task(src(), name=name, target="cuda")
    out = []
    for sk in generate_sketches(task):
        for s in (sk, *(getattr(p, "sketch", None) for p in (getattr(sk, "parts", ()) or ()))):
            if isinstance(s, R.GpuSketch):
                out.append(s)
    return tuple(out)


def _plain_validate(stage, knobs, values, *, strict_threads: bool = True) -> str | None:
    return R._why_invalid(stage, knobs, values, strict_threads=strict_threads)


def _candidates(sk: R.GpuSketch, n_random: int, n_sampled: int, seed: int = 7) -> list[dict[str, int]]:
    """Annotations to judge: all-random options, factorizations of each split's (padded or
    exact) extent, off-option values, plainly sampled valid ones and their one-knob mutations
    (random option, the neighbouring option, a knob dropped)."""
    st = sk.gpu_stage
    rng = random.Random(seed)
    cands: list[dict[str, int]] = []
    for i in range(n_random):
        v: dict[str, int] = {}
        mode = i % 3
        for s in sk.splits:
            if not s.tile_knobs:
                continue
            if mode == 0:
                for n in s.tile_knobs:
                    v[n] = rng.choice(sk.knob(n).options)
            else:
                e = rng.choice([s.extent, st.extents[s.dim]])
                f = rng.choice(factorizations(e, len(s.tile_knobs) + 1))
                v.update(zip(s.tile_knobs, sizes_from_factors(f), strict=True))
        for k in sk.knobs:
            if k.name not in v:
                v[k.name] = rng.choice(k.options)
        if mode == 2 and rng.random() < 0.15:
            v[rng.choice(list(v))] = 3  # (maybe not an option)
        cands.append(v)
    srng = random.Random(seed + 1)
    for i in range(n_sampled):
        try:
            v = _reference_sample(sk, srng, ragged=bool(i % 2), max_tries=400).values()
        except SamplingError:
            continue
        cands.append(v)
        for _ in range(2):
            w = dict(v)
            k = srng.choice(sk.knobs)
            w[k.name] = srng.choice(k.options)
            cands.append(w)
        k = srng.choice(sk.knobs)
        opts = sorted(k.options)
        if k.name in v and int(v[k.name]) in opts:
            j = opts.index(int(v[k.name])) + srng.choice((-1, 1))
            if 0 <= j < len(opts):
                cands.append({**v, k.name: opts[j]})
        w = dict(v)
        w.pop(srng.choice(list(w)))
        cands.append(w)
    return cands


def _reference_sample(sk: R.GpuSketch, rng: random.Random, **kw):
    """`_sample_gpu_reference` with its `validate_gpu` the plain checks (not the compiled verdict)."""
    saved = R.validate_gpu
    R.validate_gpu = _plain_validate
    try:
        return R._sample_gpu_reference(sk, rng, **kw)
    finally:
        R.validate_gpu = saved


def _verdict_mismatches(sk: R.GpuSketch, cands: list[Mapping[str, int]]) -> tuple[list, int]:
    """(mismatches, valid count): checker vs `_why_invalid`, and `GpuSearchSpace.valid` vs the plain rule."""
    st = sk.gpu_stage
    chk = R._checker(st, sk.knobs)
    assert chk is not None, f"{sk.name}: no compiled checker for this stage"
    bad, n_valid = [], 0
    spaces = [(rp, sk.search_space(rp)) for rp in (0.0, 0.75)]
    for v in cands:
        for strict in (True, False):
            got = chk.ok(v, strict)
            want = R._why_invalid(st, sk.knobs, v, strict_threads=strict)
            n_valid += want is None
            if got != (want is None):
                bad.append(("ok", strict, dict(v), got, want))
        for rp, space in spaces:
            try:
                want = (R._why_invalid(st, sk.knobs, sk.complete(v)) is None
                        and (rp > 0 or not st.ragged_dims(v)))
            except KeyError:
                want = False
            try:
                got = space.valid(v)
            except KeyError:
                got = False
            if got != want:
                bad.append(("space.valid", rp, dict(v), got, want))
    return bad, n_valid


def _sampler_mismatches(sk: R.GpuSketch, seeds: range, max_tries: int = 300) -> tuple[list, int]:
    """(mismatches, draws that succeeded): seeded `sample_gpu` vs the plain reference, the same
    schedule (or both failing) and the same generator state after, ragged on and off."""
    bad, drawn = [], 0
    for ragged in (True, False):
        assert R._sample_plan(sk, ragged) is not None, f"{sk.name}: no sample plan (ragged={ragged})"
        for seed in seeds:
            r1, r2 = random.Random(seed), random.Random(seed)
            try:
                a = R.sample_gpu(sk, r1, ragged=ragged, max_tries=max_tries)
            except SamplingError:
                a = "SamplingError"
            try:
                b = _reference_sample(sk, r2, ragged=ragged, max_tries=max_tries)
            except SamplingError:
                b = "SamplingError"
            drawn += a != "SamplingError"
            if a != b or r1.getstate() != r2.getstate():
                bad.append((seed, ragged, a, b, r1.getstate() == r2.getstate()))
    return bad, drawn


def _fmt(name: str, bad: list) -> str:
    return f"{name}: {len(bad)} disagreements, first: " + "\n  ".join(map(repr, bad[:5]))


@pytest.mark.parametrize("name", list(FAST))
def test_checker_verdicts_agree(name: str) -> None:
    sketches = _gpu_sketches(name, FAST[name])
    assert sketches, name
    for sk in sketches:
        cands = _candidates(sk, n_random=240, n_sampled=60)
        bad, n_valid = _verdict_mismatches(sk, cands)
        assert not bad, _fmt(name, bad)
        # both verdicts occur (the comparison is not vacuous)
        assert 0 < n_valid < 2 * len(cands), (name, n_valid, len(cands))


@pytest.mark.parametrize("name", list(FAST))
def test_seeded_sampler_matches_reference(name: str) -> None:
    for sk in _gpu_sketches(name, FAST[name]):
        bad, drawn = _sampler_mismatches(sk, range(30))
        assert not bad, _fmt(name, bad)
        assert drawn, name


def test_planted_disagreements_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule changed on one side only shows up: shared memory counted twice by the plain checks
    (the compiled checker sums its own tiles), registers of the cooperative copies counted
    higher by the compiled checker only (the plain checks use `_copy_tiles`)."""
    (sk,) = _gpu_sketches("matmul-509x1021x257", FAST["matmul-509x1021x257"])
    cands = _candidates(sk, n_random=60, n_sampled=40)
    assert not _verdict_mismatches(sk, cands)[0]

    with monkeypatch.context() as m:
        shared = R.shared_bytes
        m.setattr(R, "shared_bytes", lambda stage, values: 2 * shared(stage, values))
        bad, _ = _verdict_mismatches(sk, cands)
        # (only in one direction: the compiled checker accepts what the plain checks now refuse)
        assert any(kind == "ok" for kind, *_ in bad), bad[:3]
        assert all(got is True for _, _, _, got, _ in bad), bad[:3]
        # the plan's draws go on, the reference rejects some of them: different schedules
        assert _sampler_mismatches(sk, range(12))[0]

    with monkeypatch.context() as m:
        copy_elems = R._copy_elems
        m.setattr(R, "_copy_elems", lambda shape, threads, eb: copy_elems(shape, threads, eb) + 64)
        bad, _ = _verdict_mismatches(sk, cands)
        assert any(kind == "ok" and not got and want is None for kind, _, _, got, want in bad), bad[:3]

    assert not _verdict_mismatches(sk, cands)[0]
    assert not _sampler_mismatches(sk, range(4))[0]


@pytest.mark.slow
def test_all_builtin_gpu_sketches_agree() -> None:
    """The larger sweep: every built-in workload's GPU sketches, more annotations and seeds."""
    checked = 0
    for name, src in _slow_sources().items():
        try:
            sketches = _gpu_sketches(name, src)
        except Exception:  # (a workload the CUDA target does not take: not this test's concern)
            continue
        for sk in sketches:
            if R._checker(sk.gpu_stage, sk.knobs) is None:
                continue
            cands = _candidates(sk, n_random=300, n_sampled=100, seed=11)
            bad, _ = _verdict_mismatches(sk, cands)
            assert not bad, _fmt(name, bad)
            if R._sample_plan(sk, True) is not None and R._sample_plan(sk, False) is not None:
                bad, _ = _sampler_mismatches(sk, range(100, 130))
                assert not bad, _fmt(name, bad)
            checked += 1
    assert checked >= 30, checked
