"""Program features: Ansor's per-statement feature rows of a scheduled program, for the cost model.

    SearchTask.ir --parse once--> payload --clone, apply script, ansor-feature-cleanup+cse-->
      scheduled scf/vector IR --ansor-extract-features (C++, via ctypes)--> float32 [rows, N_FEATURES]

    a batch of scripts --group by sketch structure (parse once)--> cut where prefixes repeat
      --> prefix applied once per distinct prefix --> clone --> rest of the script per candidate

One row per storing statement (vector.transfer_write, copying insert_slice, leftover linalg op),
each `N_FEATURES` log2(1+x)-scaled values named by `feature_names()`; the definitions are in
`passes/Passes.td` (pass `ansor-extract-features`). Ansor's 134 come first; the `tc*` slots after
them describe the tensor-core (wgmma + TMA) kernel of a function the tensor-core sketch's script
annotated (`ansor.tc.*`: block tile, MMAs, stages, shared-memory and TMA bytes, split-K, waves),
zero on every other program (CPU ones included); then `pipeline_stages`, the CUDA-core
GPU sketch's shared-memory buffers per cached tile (its launch's `ansor.pipeline_stages`), and
last `rows_per_block`, the rows one block of the row sketch runs (its launch's
`ansor.rows_per_block`, packed after the loops the features see). `featurize` runs in the calling process and
aborts with it when MLIR hits an assertion on a bad script; `FeatureExtractor` runs it in worker
processes (the measurement workers of `measure/measurer.py`), so a crash costs only the bad candidate.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Self

import numpy as np
from mlir import ir, passmanager
from mlir.dialects import transform
from mlir.dialects.transform import interpreter, structured

from ansor.core import mlir as core_mlir
from ansor.core import native as _native
from ansor.core.task import SearchTask

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
#: All-static size lists of tiling and packing ops (`tile_sizes [4, 16, 0]`, `packed_sizes = [0, 32, 0]`);
#: the word before `_sizes` is checked apart (a pattern starting with a literal is scanned for fast).
_SIZES = re.compile(r"_sizes( = | )\[(\d+(?:, \d+)*)\]")
#: The attribute holding each of those lists, by op (checked against the text when a script is parsed).
_SIZE_ATTR = {
    "transform.structured.tile_using_for": "static_sizes",
    "transform.structured.tile_using_forall": "static_tile_sizes",
    "transform.structured.pack": "static_packed_sizes",
}
#: Discardable attribute prefix of the payload ops a cached prefix hands to the rest of its script
#: (`_part`); `ansor-feature-cleanup` removes them before extraction.
_MARK = "ansor.prefix."

#: Milliseconds an op of a matmul or convolution sketch takes to apply, roughly (op-by-op timing of
#: matmul-1024's sketches on the 2-core EPYC host, 2026-11-28); what caching a prefix saves.
_OP_MS = {
    "transform.tune.knob": 0.0,
    "transform.param.constant": 0.0,
    "transform.apply_patterns": 0.3,
    "transform.structured.fuse_into_containing_op": 0.3,
    "transform.structured.tile_using_forall": 0.1,
    "transform.structured.tile_using_for": 0.07,
    "transform.sequence": 0.05,
    "transform.loop.hoist_loop_invariant_subsets": 0.05,
}
_OTHER_OP_MS = 0.02
#: Per candidate, what a cached prefix costs: its larger payload to clone and the suffix's matches.
_SPLIT_MS = 0.03


def _walk(op: ir.Operation) -> list[ir.Operation]:
    """`op` and every op nested in it, in pre-order (the order the ops print in)."""
    out = [op]
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                out.extend(_walk(child.operation))
    return out


def _is_param_source(op: ir.Operation) -> bool:
    """A knob or constant: an op without operands whose results are all parameters."""
    return (len(op.operands) == 0 and len(op.results) > 0
            and all(str(r.type).startswith("!transform.param") for r in op.results))


class _Blanked:
    """A script's text with its knob values and static size lists blanked, and those values.

    Sizes are blanked only to '?' where non-zero: a zero tile size changes how many loops a
    tiling op returns, so it stays part of the structure."""

    def __init__(self, script: str) -> None:
        self.knobs: dict[str, int] = {}
        self.sizes: list[tuple[int, ...]] = []

        def knob(m: re.Match) -> str:
            self.knobs[m.group(2)] = int(m.group(3))
            return m.group(1) + "?" + m.group(4)

        def sizes(m: re.Match) -> str:
            if not (m.string.endswith(" tile", 0, m.start()) or m.string.endswith(" packed", 0, m.start())):
                return m.group(0)
            values = tuple(int(v) for v in m.group(2).split(", "))
            self.sizes.append(values)
            return "_sizes" + m.group(1) + "[" + ", ".join("0" if v == 0 else "?" for v in values) + "]"

        self.plain = _KNOB.sub(knob, script)  # knob values blanked
        self.key = _SIZES.sub(sizes, self.plain)  # static sizes too


class _Script:
    """A parsed transform script (or part of one) whose knob values and static sizes are set per
    candidate: `transform.tune.knob`'s `selected` and the tiling/packing ops' static size lists."""

    def __init__(self, tmod: ir.Module, seq: ir.Operation, *, sizes: bool) -> None:
        self.tmod, self.seq = tmod, seq
        self.knobs: dict[str, list[ir.Operation]] = {}
        self.size_ops: list[tuple[ir.Operation, str]] = []
        for op in _walk(seq):
            if op.name == "transform.tune.knob":
                self.knobs.setdefault(ir.StringAttr(op.attributes["name"]).value, []).append(op)
            elif sizes and op.name in _SIZE_ATTR and _all_static(op):
                self.size_ops.append((op, _SIZE_ATTR[op.name]))

    @property
    def ops(self) -> list[ir.Operation]:
        return [op.operation for op in self.seq.regions[0].blocks[0].operations]

    def matches_sizes(self, sizes: list[tuple[int, ...]]) -> bool:
        """Whether the static size lists of the text are, in order, those of `size_ops`."""
        return len(sizes) == len(self.size_ops) and all(
            tuple(ir.DenseI64ArrayAttr(op.attributes[name])) == values
            for (op, name), values in zip(self.size_ops, sizes, strict=True))

    def set(self, knobs: dict[str, int], sizes: list[tuple[int, ...]]) -> None:
        i64 = ir.IntegerType.get_signless(64)
        for name, ops in self.knobs.items():
            if name in knobs:  # a knob the pattern did not blank keeps its value in the key
                for op in ops:
                    op.attributes["selected"] = ir.IntegerAttr.get(i64, knobs[name])
        for (op, name), values in zip(self.size_ops, sizes, strict=True):
            op.attributes[name] = ir.DenseI64ArrayAttr.get(list(values))

    def apply(self, module: ir.Module) -> None:
        core_mlir.apply_parsed_script(module, self.tmod, self.seq, _OPTIONS)


def _all_static(op: ir.Operation) -> bool:
    name = _SIZE_ATTR[op.name]
    return name in op.attributes and all(v >= 0 for v in ir.DenseI64ArrayAttr(op.attributes[name]))


def _is_handle(v: ir.Value) -> bool:
    t = str(v.type)
    return t == "!transform.any_op" or t.startswith("!transform.op<")


def _handed_over(ops: list[ir.Operation], k: int) -> list[ir.Value]:
    """Results of `ops[:k]` (other than knobs and constants) used by `ops[k:]`, in order."""
    index = {op: i for i, op in enumerate(ops)}
    out: dict[ir.Value, None] = {}
    for op in ops[k:]:
        for inner in _walk(op):
            for v in inner.operands:
                i = index.get(v.owner.operation) if isinstance(v, ir.OpResult) else None
                if i is not None and i < k and not _is_param_source(ops[i]):
                    out.setdefault(v)
    return list(out)


def _part(text: str, lo: int, hi: int | None, *, sizes: bool) -> _Script:
    """Top-level ops `lo` to `hi` (exclusive; None: to the end) of the script `text`, with its
    knobs and constants. It starts by matching again, by their marks, the payload ops of the
    handles that earlier ops pass to it or beyond, and ends by marking those that later parts
    use (a discardable `ansor.prefix.cK.hI` attribute, K the cut, I the handle)."""
    tmod, seq = core_mlir.parse_script(text)
    ops = [op.operation for op in seq.regions[0].blocks[0].operations]
    end = len(ops) - 1 if hi is None else hi  # ops[-1] is the yield
    handed_in = _handed_over(ops, lo) if lo > 0 else []
    handed_out = _handed_over(ops, hi) if hi is not None else []
    for op in reversed(ops[end:-1]):
        op.erase()
    root = seq.regions[0].blocks[0].arguments[0]
    any_op = transform.AnyOpType.get()
    new: dict[ir.Value, ir.Value] = {}
    with ir.InsertionPoint(ops[lo]):
        for i, value in enumerate(handed_in):
            marks = ir.DictAttr.get({f"{_MARK}c{lo}.h{i}": ir.UnitAttr.get()})
            matched = structured.MatchOp(any_op, root, op_attrs=marks).result
            if value.type != any_op:
                matched = transform.CastOp(value.type, matched).result
            value.replace_all_uses_with(matched)
            new[value] = matched
    with ir.InsertionPoint(ops[-1]):
        for i, value in enumerate(handed_out):
            transform.AnnotateOp(new.get(value, value), f"{_MARK}c{hi}.h{i}")
    for op in reversed(ops[:lo]):
        if not _is_param_source(op):
            op.erase()
    return _Script(tmod, seq, sizes=sizes)


class _Structure:
    """The scripts of one sketch structure: one parse (`whole`), and where it can be cut.

    A cut before top-level op k is possible when every value the ops from k on take from
    earlier ops is an op handle (handed over by marking its payload ops, `_part`), knobs and
    constants aside. `cuts` holds, per possible k, what the ops before it read (knob names,
    how many static size lists) and what they cost (`_OP_MS`)."""

    def __init__(self, script: str, blanked: _Blanked) -> None:
        tmod, seq = core_mlir.parse_script(script)
        ops = [op.operation for op in seq.regions[0].blocks[0].operations]
        # Full canonicalization at the end becomes the reused `CLEANUP` pass manager (see `_ScriptCache`).
        self.cleanup = (len(ops) >= 3 and ops[-2].name == "transform.apply_cse"
                        and ops[-3].name == "transform.apply_patterns"
                        and [p.operation.name for p in ops[-3].regions[0].blocks[0].operations]
                        == ["transform.apply_patterns.canonicalization"])
        if self.cleanup:
            ops[-2].erase()
            ops[-3].erase()
        self.whole = _Script(tmod, seq, sizes=True)
        self.sizes = self.whole.matches_sizes(blanked.sizes)  # else keyed by the knob-blanked text
        if not self.sizes:
            self.whole = _Script(tmod, seq, sizes=False)
        self._cuts: dict[int, tuple[tuple[str, ...], int, float]] | None = None
        self.total_ms = 0.0
        self._parts: dict[tuple[int, ...], list[_Script]] = {}

    @property
    def cuts(self) -> dict[int, tuple[tuple[str, ...], int, float]]:
        """k -> (knobs read before op k, static size lists before it, estimated ms before it)."""
        if self._cuts is None:
            self._cuts = self._analyze() if self.cleanup else {}
        return self._cuts

    def _analyze(self) -> dict[int, tuple[tuple[str, ...], int, float]]:
        ops = self.whole.ops
        index = {op: i for i, op in enumerate(ops)}
        knob_of = {op: ir.StringAttr(op.attributes["name"]).value
                   for op in ops if op.name == "transform.tune.knob"}
        # blocked[k] > 0: some non-handle value defined before k is used at or after k
        blocked = [0] * (len(ops) + 1)
        last_use: dict[ir.Value, int] = {}
        reads: list[tuple[list[str], int]] = []
        for j, op in enumerate(ops):
            knobs, n_sizes = [], 0
            for inner in _walk(op):
                for v in inner.operands:
                    i = index.get(v.owner.operation) if isinstance(v, ir.OpResult) else None
                    if i is None or i == j:
                        continue
                    if ops[i] in knob_of:
                        knobs.append(knob_of[ops[i]])
                    elif not _is_param_source(ops[i]) and not _is_handle(v):
                        last_use[v] = max(last_use.get(v, j), j)
                if self.sizes and inner.name in _SIZE_ATTR and _all_static(inner):
                    n_sizes += 1
            reads.append((knobs, n_sizes))
        for v, j in last_use.items():
            blocked[index[v.owner.operation] + 1] += 1
            blocked[j + 1] -= 1
        out: dict[int, tuple[tuple[str, ...], int, float]] = {}
        knobs_so_far: dict[str, None] = {}
        n_sizes, ms, live = 0, 0.0, 0
        for k in range(1, len(ops)):
            op = ops[k - 1]
            knobs_so_far.update(dict.fromkeys(reads[k - 1][0]))
            n_sizes += reads[k - 1][1]
            ms += _OP_MS.get(op.name, _OTHER_OP_MS)
            live += blocked[k]
            if k < len(ops) - 1 and live == 0 and not _is_param_source(op):
                out[k] = (tuple(knobs_so_far), n_sizes, ms)
        self.total_ms = ms
        return out

    def prefix_key(self, b: _Blanked, k: int) -> tuple:
        """What the ops before cut `k` read of candidate `b`: equal keys, equal payloads after them."""
        knobs, n_sizes, _ = self.cuts[k]
        return tuple(b.knobs.get(name) for name in knobs), tuple(b.sizes[:n_sizes]) if self.sizes else ()

    def choose_cuts(self, candidates: list[_Blanked]) -> list[int]:
        """The cuts that minimize the estimated time to apply the script to every candidate, each
        part once per distinct value of what the ops before its end read (a trie of prefixes)."""
        n = len(candidates)
        if n < 2 or not self.cuts:
            return []
        distinct = {k: len({self.prefix_key(b, k) for b in candidates}) for k in self.cuts}
        # best[k]: least cost of applying everything before cut k, and the cuts taken
        best: dict[int, tuple[float, list[int]]] = {0: (0.0, [])}
        for k, (_, _, ms) in self.cuts.items():
            best[k] = min(
                (cost + distinct[k] * (ms - (self.cuts[p][2] if p else 0.0) + _SPLIT_MS), [*chosen, k])
                for p, (cost, chosen) in best.items()
            )
        _, chosen = min(
            (cost + n * (self.total_ms - (self.cuts[k][2] if k else 0.0) + _SPLIT_MS), chosen)
            for k, (cost, chosen) in best.items()
        )
        return chosen

    def parts(self, cuts: tuple[int, ...]) -> list[_Script]:
        """The script cut before each of `cuts` (`_part`), parsed once per set of cuts."""
        if cuts not in self._parts:
            text = str(self.whole.tmod)
            bounds = [0, *cuts, None]
            self._parts[cuts] = [_part(text, lo, hi, sizes=self.sizes) for lo, hi in itertools.pairwise(bounds)]
        return self._parts[cuts]


class _ScriptCache:
    """Parsed transform scripts of one context, keyed by their text with knob values and static
    tile/pack sizes blanked (`_Blanked`), and the payloads after their common prefixes.

    Candidates of one sketch differ mostly in knob values (`transform.tune.knob ... = V`) and
    static size lists, so a script is parsed once and later candidates only set those
    attributes. Blanked values are set again per candidate, never shared: the tensor-core
    sketch's `transform.annotate ... "ansor.tc.stages" = %k` ops read their knobs, so a prefix
    holding them is keyed by those knobs' values like any other (tests/test_features_tc.py). A batch's candidates of one structure are then cut where the estimated time is
    least (`_Structure.choose_cuts`): the ops before a cut (the outer tiling and fusion, the
    packed sketch's packing and canonicalization) are applied once per distinct value of the
    knobs and sizes they read, and each candidate applies only the ops after the last cut to a
    copy of that payload. Rows are the same as when each script is applied whole.

    The trailing `apply_patterns.canonicalization` + `apply_cse` of a cached script is dropped
    and replaced by one reused `ansor-feature-cleanup,cse` pass manager (`CLEANUP`): full
    canonicalization, whether as the transform op or as the pass, was half of the time per
    candidate and more; the targeted pass does the folds that change features at well under
    half of that cost. Features are the same as after full canonicalization on all but rare
    candidates (tests/test_features.py), and training and prediction both read them this way.
    The pass manager does not verify the IR between and after its passes (the verifier took
    half of its time); a script that yields invalid IR fails when it is built for measurement.
    """

    def __init__(self, *, split: bool = True) -> None:
        self.split = split
        self.structures: dict[str, _Structure] = {}
        self.cleanup = passmanager.PassManager.parse(CLEANUP)
        self.cleanup.enable_verifier(False)

    def structure(self, script: str, blanked: _Blanked) -> _Structure:
        st = self.structures.get(blanked.key)
        if st is None:
            st = self.structures.get(blanked.plain)
        if st is None:
            st = self._parse(script, blanked)
            self.structures[blanked.key if st.sizes else blanked.plain] = st
        return st

    @staticmethod
    def _parse(script: str, blanked: _Blanked) -> _Structure:
        return _Structure(script, blanked)

    def run(self, payload: ir.Module, scripts: list[str | None]) -> list[np.ndarray | None]:
        """Feature rows of `payload` under each script (None where a script fails)."""
        out: list[np.ndarray | None] = [None] * len(scripts)
        groups: dict[int, tuple[_Structure, list[tuple[int, _Blanked]]]] = {}
        for i, script in enumerate(scripts):
            if script is None:
                out[i] = self._rows(payload, None, None, None, [])
                continue
            blanked = _Blanked(script)
            try:
                st = self.structure(script, blanked)
            except (core_mlir.LoweringError, ir.MLIRError) as exc:
                log.debug("featurize: %s", exc)
                continue
            groups.setdefault(id(st), (st, []))[1].append((i, blanked))
        for st, members in groups.values():
            cuts = st.choose_cuts([b for _, b in members]) if self.split else []
            if not cuts:
                for i, b in members:
                    out[i] = self._rows(payload, st, st.whole, b, b.sizes if st.sizes else [])
                continue
            sizes = [0, *(st.cuts[k][1] for k in cuts), None]
            self._descend(st, cuts, st.parts(tuple(cuts)), sizes, 0, payload, members, out)
        return out

    def _descend(self, st: _Structure, cuts: list[int], parts: list[_Script], sizes: list[int | None],
                 level: int, start: ir.Module, members: list[tuple[int, _Blanked]],
                 out: list[np.ndarray | None]) -> None:
        """Apply `parts[level]` once per distinct prefix key at `cuts[level]` among `members`,
        then the rest, each candidate's last part to its own copy."""
        lo, hi = sizes[level], sizes[level + 1]
        if level == len(cuts):
            for i, b in members:
                out[i] = self._rows(start, st, parts[level], b, b.sizes[lo:] if st.sizes else [])
            return
        same: dict[tuple, list[tuple[int, _Blanked]]] = {}
        for i, b in members:
            same.setdefault(st.prefix_key(b, cuts[level]), []).append((i, b))
        for group in same.values():
            b0 = group[0][1]
            module = _clone(start)
            try:
                parts[level].set(b0.knobs, b0.sizes[lo:hi] if st.sizes else [])
                parts[level].apply(module)
            except (core_mlir.LoweringError, ir.MLIRError) as exc:
                log.debug("featurize: %s", exc)
                continue  # every candidate sharing these ops fails with them
            self._descend(st, cuts, parts, sizes, level + 1, module, group, out)

    def _rows(self, start: ir.Module, st: _Structure | None, part: _Script | None, b: _Blanked | None,
              sizes: list[tuple[int, ...]]) -> np.ndarray | None:
        """Rows of a copy of `start` after `part` with `b`'s values (None: untransformed)."""
        module = _clone(start)
        try:
            if part is not None:
                part.set(b.knobs, sizes)
                part.apply(module)
            if st is None or st.cleanup:
                self.cleanup.run(module.operation)
            return extract_from_module(module)
        except (core_mlir.LoweringError, ir.MLIRError) as exc:
            log.debug("featurize: %s", exc)
            return None


_OPTIONS = interpreter.TransformOptions()
_OPTIONS.expensive_checks = False  # handle-invalidation checks: scripts come from our own renderer


def featurize(task: SearchTask, scripts: list[str | None], *, split: bool = True) -> list[np.ndarray | None]:
    """Feature rows of `task` under each transform script (None: the untransformed payload).

    The payload is parsed once and cloned per script, scripts are parsed once per sketch
    structure, and with `split` a prefix common to several scripts is applied once
    (`_ScriptCache`); a script that fails to apply gives None. Rows do not depend on the batch
    or on `split`. MLIR assertion failures abort the process: use `FeatureExtractor` on
    untrusted scripts.
    """
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        payload = core_mlir.parse_payload(task)
        return _ScriptCache(split=split).run(payload, scripts)


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
