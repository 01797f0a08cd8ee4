"""Program features: Ansor's per-statement feature rows of a scheduled program, for the cost model.

    SearchTask.ir --parse once--> payload --clone, apply script, ansor-feature-cleanup+cse-->
      scheduled scf/vector IR --ansor-extract-features (C++, via ctypes)--> float32 [rows, N_FEATURES]

One row per storing statement (vector.transfer_write, copying insert_slice, leftover linalg op),
each `N_FEATURES` log2(1+x)-scaled values named by `feature_names()`; the definitions are in
`passes/Passes.td` (pass `ansor-extract-features`). `featurize` runs in the calling process and
aborts with it when MLIR hits an assertion on a bad script; `FeatureExtractor` runs it in worker
processes (the measurement workers of `measure/measurer.py`), so a crash costs only the bad candidate.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Self

import numpy as np
from mlir import ir, passmanager
from mlir.dialects.transform import interpreter

from ansor.core import native as _native
from ansor.core.task import SearchTask
from ansor.core import mlir as core_mlir

__all__ = ["N_FEATURES", "FeatureExtractor", "extract_from_module", "feature_names", "featurize"]

log = logging.getLogger(__name__)


def _lib() -> ctypes.CDLL:
    lib = _native.load()
    if not hasattr(lib, "ansorExtractFeatures"):
        raise _native.NativeLibraryNotFound(
            "libAnsorMLIR.so predates feature extraction: rebuild it (pip install --no-build-isolation -e .)"
        )
    return lib


#: Length of one feature row (a compile-time constant of the C++ pass).
N_FEATURES: int = int(_lib().ansorNumFeatures())


def feature_names() -> list[str]:
    """Names of the `N_FEATURES` columns, e.g. ``"float_mad"``, ``"B0.bytes"``, ``"ai_3"``."""
    lib = _lib()
    return [lib.ansorFeatureName(i).decode() for i in range(N_FEATURES)]


class _RowBuffer:
    """A float32 buffer reused across calls (one per process), grown when a program has more rows."""

    def __init__(self, rows: int = 64) -> None:
        self.array = np.empty((rows, N_FEATURES), dtype=np.float32)


_buffer = _RowBuffer()


def extract_from_module(module: ir.Module | ir.Operation) -> np.ndarray:
    """Feature rows (float32, shape [statements, N_FEATURES]) of a scheduled module or op."""
    lib = _lib()
    ptr = _native.operation_pointer(module)
    while True:
        buf = _buffer.array
        n = int(lib.ansorExtractFeatures(ptr, buf.ctypes.data, buf.shape[0]))
        if n < 0:
            raise RuntimeError("ansorExtractFeatures failed")
        if n <= buf.shape[0]:
            return buf[:n].copy()
        _buffer.array = np.empty((max(n, 2 * buf.shape[0]), N_FEATURES), dtype=np.float32)


def _clone(payload: ir.Module) -> ir.Module:
    """A fresh module holding copies of `payload`'s top-level ops (and its attributes)."""
    module = ir.Module.create()
    for attr in payload.operation.attributes:
        module.operation.attributes[attr.name] = attr.attr
    with ir.InsertionPoint(module.body):
        for op in payload.body.operations:
            op.operation.clone()
    return module


#: What runs between a candidate's transform script and feature extraction (see passes/Passes.td).
CLEANUP = "builtin.module(ansor-feature-cleanup,cse)"

_KNOB = re.compile(r'(transform\.tune\.knob<"([^"]+)"> = )(-?\d+)( : i64 from)')


class _ScriptCache:
    """Parsed transform scripts of one context, keyed by their text with the knob values blanked.

    Candidates of one sketch differ mostly in knob values (`transform.tune.knob ... = V`), so a
    script is parsed once and later candidates only set each knob's `selected` attribute. The
    trailing `apply_patterns.canonicalization` + `apply_cse` of a cached script is dropped and
    replaced by one reused `ansor-feature-cleanup,cse` pass manager (`CLEANUP`): full
    canonicalization, whether as the transform op or as the pass, was half of the time per
    candidate and more; the targeted pass does the folds that change features at well under
    half of that cost. Features are the same as after full canonicalization on all but rare
    candidates (tests/test_features.py), and training and prediction both read them this way.
    """

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[str, tuple[ir.Module, ir.Operation, dict[str, ir.Operation], bool]] = OrderedDict()
        self.cleanup = passmanager.PassManager.parse(CLEANUP)

    def apply(self, module: ir.Module, script: str) -> None:
        values: dict[str, int] = {}

        def blank(m: re.Match) -> str:
            values[m.group(2)] = int(m.group(3))
            return m.group(1) + "?" + m.group(4)

        key = _KNOB.sub(blank, script)
        entry = self.entries.get(key)
        if entry is None:
            entry = self._parse(script)
            self.entries[key] = entry
            if len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
        tmod, seq, knobs, cleanup = entry
        for name, op in knobs.items():
            if name in values:  # a knob the pattern did not blank keeps its value in the key
                op.attributes["selected"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), values[name])
        core_mlir.apply_parsed_script(module, tmod, seq, _OPTIONS)
        if cleanup:
            self.cleanup.run(module.operation)

    @staticmethod
    def _parse(script: str) -> tuple[ir.Module, ir.Operation, dict[str, ir.Operation], bool]:
        tmod, seq = core_mlir.parse_script(script)
        ops = [op.operation for op in seq.regions[0].blocks[0].operations]
        knobs = {ir.StringAttr(op.attributes["name"]).value: op for op in ops if op.name == "transform.tune.knob"}
        cleanup = False
        if (len(ops) >= 3 and ops[-2].name == "transform.apply_cse" and ops[-3].name == "transform.apply_patterns"
                and [p.operation.name for p in ops[-3].regions[0].blocks[0].operations]
                == ["transform.apply_patterns.canonicalization"]):
            ops[-2].erase()
            ops[-3].erase()
            cleanup = True
        return tmod, seq, knobs, cleanup


_OPTIONS = interpreter.TransformOptions()
_OPTIONS.expensive_checks = False  # handle-invalidation checks: scripts come from our own renderer


def featurize(task: SearchTask, scripts: list[str | None]) -> list[np.ndarray | None]:
    """Feature rows of `task` under each transform script (None: the untransformed payload).

    The payload is parsed once and cloned per script, and scripts are parsed once per sketch
    structure (`_ScriptCache`); a script that fails to apply gives None. MLIR assertion
    failures abort the process: use `FeatureExtractor` on untrusted scripts.
    """
    _native.register_everything()
    out: list[np.ndarray | None] = []
    with ir.Context(), ir.Location.unknown():
        payload = core_mlir.parse_payload(task)
        cache = _ScriptCache()
        for script in scripts:
            module = _clone(payload)
            try:
                if script is not None:
                    cache.apply(module, script)
                else:
                    cache.cleanup.run(module.operation)
                out.append(extract_from_module(module))
            except (core_mlir.LoweringError, ir.MLIRError) as exc:
                log.debug("featurize: %s", exc)
                out.append(None)
    return out


class FeatureExtractor:
    """`featurize` in worker processes, a batch split across `n_workers` workers in parallel.

    A worker that dies (MLIR assertion, segfault) or hangs is restarted; its chunk is then
    retried one script at a time, so only the candidate that crashes gets None.
    """

    def __init__(
        self, n_workers: int | None = None, *, timeout_s: float = 60.0, memory_mb: int | None = None
    ) -> None:
        from ansor import config
        from ansor.measure.measurer import _Worker

        self.n_workers = max(1, n_workers or os.cpu_count() or 1)
        self.timeout_s = timeout_s
        mem = config.WORKER_MEMORY_MB if memory_mb is None else memory_mb
        self._workers = [_Worker(1, mem) for _ in range(self.n_workers)]
        self._pool = ThreadPoolExecutor(max_workers=self.n_workers)

    def _run(
        self, worker: object, task: SearchTask, scripts: list[str | None]
    ) -> list[np.ndarray | None] | None:
        ans = worker.request(  # type: ignore[attr-defined]
            {"kind": "features", "task": task.to_json(), "scripts": scripts, "opts": {}},
            self.timeout_s + 0.05 * len(scripts),
        )
        feats = ans.get("features")
        if feats is None or len(feats) != len(scripts):
            log.debug("feature worker failed: %s", ans.get("msg", ""))
            return None
        return feats

    def _chunk(
        self, worker: object, task: SearchTask, scripts: list[str | None]
    ) -> list[np.ndarray | None]:
        feats = self._run(worker, task, scripts)
        if feats is not None:
            return feats
        if len(scripts) == 1:
            return [None]
        # The worker crashed somewhere in the chunk: find the culprit(s) one by one.
        out: list[np.ndarray | None] = []
        for s in scripts:
            one = self._run(worker, task, [s])
            out.append(one[0] if one is not None else None)
        return out

    def extract(self, task: SearchTask, scripts: list[str | None]) -> list[np.ndarray | None]:
        """Feature rows per script (same order); None where the script fails or crashes."""
        if not scripts:
            return []
        k = min(self.n_workers, len(scripts))
        bounds = [round(i * len(scripts) / k) for i in range(k + 1)]
        futures = [
            self._pool.submit(
                self._chunk, self._workers[i], task, scripts[bounds[i] : bounds[i + 1]]
            )
            for i in range(k)
        ]
        out: list[np.ndarray | None] = []
        for f in futures:
            out.extend(f.result())
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for w in self._workers:
            w.kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
