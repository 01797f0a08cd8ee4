"""GPU rule for tasks no single kernel covers: one kernel per fusion group, in one script.

    SearchTask (two ops with data reuse; a matmul and a row sum of its result; ...)
        --ansor-partition (with row chains, else without: `PARTITION`)--> callees @f__t0, @f__t1,
        ... of one anchor op and its fused ops each --a part task per callee, its own GPU sketch
        (multi-level tiling `s0`, cross-thread reduction `r0` or thread binding)--> parts
    MultiKernelSketch.script(values) --> one transform script on the task's payload:
        the partition (`transform.apply_registered_pass`); each part's script up to
        bufferization, scoped to its callee, its knobs and op tags renumbered to the task's ops;
        one bufferization of the module; each part's mapping to blocks and threads on its
        callee; the callees inlined --lowering--> a launch per part in the task function, the
        intermediates a device workspace allocated once per program (`ansor-gpu-device-intermediates`)

A part's knobs are its own sketch's, named after the task's op numbers (`op<N>.*`: the tags
`core/loops.tag_ops` gave the task's ops, which the partition keeps), so every knob name is
unique in the task and the search's tile mutations see each part's loop splits. A part task is
the callee as a function of its own; its ops must be the callee's in the same order (what the
renumbering relies on), else the task gets no multi-kernel sketch. Tensor-core sketches of a
part are not used (their lowering replaces the whole function).

The partition runs once per task and option: `parts_of` and `_callees` are cached by content (the
frozen task: its hash, IR text, name, ...), so sketch generation and `default_script` of one
task, or several searches of it in one process, share it.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from mlir import ir

from ansor.core.loops import OP_ATTR
from ansor.core.task import SearchTask
from ansor.space.schedule import Schedule
from ansor.space.search_space import SearchSpace
from ansor.space.sketch import Knob, LoopSplit, Sketch

#: The partition the script runs first: row reductions join their producer's group where every
#: group then has a GPU sketch (attention's scores + softmax: one row kernel), else each is a
#: group of its own (`row-chains=false`: the cross-thread reduction rule takes no anchor in front
#: of its rows other than a contraction it computes per row).
PARTITION = 'transform.apply_registered_pass "ansor-partition" with options = {{ "row-chains" = {} }}'


@dataclass(frozen=True)
class Part:
    """One fusion group of a task: its callee, its task, its GPU sketch, and the task's op number
    of each of its ops (by the part task's op number)."""

    symbol: str
    task: SearchTask
    sketch: Sketch
    ops: tuple[int, ...]
    row_chains: bool = False  # the partition's option (the same for every part of a task)

    def to_task(self, name: str) -> str:
        """`name` (a knob of the part's sketch) as the task's knob."""
        return re.sub(r"^op(\d+)\.", lambda m: f"op{self.ops[int(m.group(1))]}.", name)


def _tagged(root: ir.Operation) -> list[ir.Operation]:
    """The ops under `root` carrying an op tag, in walk order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if OP_ATTR in op.attributes:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


#: How many tasks' partitions (`_callees`, per option) and parts (`parts_of`) stay cached.
CACHE_SIZE = 64


@functools.lru_cache(maxsize=CACHE_SIZE)
def _callees(task: SearchTask, row_chains: bool) -> tuple[tuple[str, str, tuple[int, ...], tuple[str, ...]], ...]:
    """The task's payload partitioned: per callee (in call order), its symbol, its text as a
    public function, and the task op number and name of each of its tagged ops (walk order).
    Cached by content (the frozen task)."""
    from ansor.core import native as _native
    from ansor.core.mlir import parse_payload, run_passes, walk

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, f"ansor-partition{{row-chains={str(row_chains).lower()}}}", "apply")
        funcs = {ir.StringAttr(op.attributes["sym_name"]).value: op for op in walk(module.operation, "func.func")}
        order = [ir.FlatSymbolRefAttr(c.attributes["callee"]).value for c in walk(funcs[task.func_name], "func.call")]
        out = []
        for sym in order:
            f = funcs[sym]
            tags = [(ir.IntegerAttr(op.attributes[OP_ATTR]).value, op.name) for op in _tagged(f)]
            for op in _tagged(f):  # the part task tags its own ops
                del op.attributes[OP_ATTR]
            text = str(f).replace("func.func private @", "func.func @", 1)
            out.append((sym, text, tuple(t for t, _ in tags), tuple(n for _, n in tags)))
    return tuple(out)


def partition_size(task: SearchTask) -> int:
    """How many fusion groups `ansor-partition` (without row chains) makes of `task`'s function;
    0 when it refuses the payload."""
    try:
        return len(_callees(task, False))
    except Exception:  # noqa: BLE001 - only a count for a hint
        return 0


@functools.lru_cache(maxsize=CACHE_SIZE)
def parts_of(task: SearchTask) -> tuple[tuple[Part, ...] | None, str]:
    """The parts of `task` (two or more), or (None, why not): the partition with row chains
    where each of its groups has a GPU sketch, else the one without. Cached by content (the
    frozen task: `generate_gpu_sketches`, then `default_script`, ask for it)."""
    why = ""
    for row_chains in (True, False):
        parts, why = _parts(task, row_chains)
        if parts is not None:
            return parts, why
    return None, why


def _parts(task: SearchTask, row_chains: bool) -> tuple[tuple[Part, ...] | None, str]:
    """The parts of one partition of `task` (`row_chains`: `ansor-partition`'s option)."""
    from ansor.core.mlir import parse_payload
    from ansor.core.task import create_task
    from ansor.targets.cuda.rules import GpuSketch, generate_gpu_sketches
    from ansor.targets.cuda.reduction import RowSketch

    try:
        callees = _callees(task, row_chains)
    except Exception as exc:  # noqa: BLE001 - a payload the partition refuses: no parts
        return None, f"the partition fails ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    if len(callees) < 2:
        return None, "one fusion group (no kernel to split off)"
    if len(set(s for s, *_ in callees)) != len(callees):
        return None, "a fusion group called twice"
    parts = []
    for k, (sym, text, tags, names) in enumerate(callees):
        sub = create_task(f"module {{\n{text}\n}}", name=f"{task.name}__t{k}", target="cuda")
        with ir.Context(), ir.Location.unknown():
            local = tuple(op.name for op in _tagged(parse_payload(sub).operation))
        if local != names:
            return None, f"part {k} ({sym}): its task's ops {list(local)} are not the group's {list(names)}"
        sk = next((s for s in generate_gpu_sketches(sub) if isinstance(s, (GpuSketch, RowSketch))), None)
        if sk is None:
            from ansor.targets.cuda.rules import gpu_schedulable

            return None, f"part {k} ({sym}): {gpu_schedulable(sub)[1]}"
        parts.append(Part(sym, sub, sk, tuple(tags), row_chains))
    return tuple(parts), f"gpu_multi_kernel({', '.join(p.sketch.rule for p in parts)})"


# ----------------------------------------------------------------------------------------------
# The script


_SSA = re.compile(r"%([A-Za-z_][\w]*)")
_FUNC = 'transform.structured.match ops{["func.func"]} in '


def _scoped(part: Part, k: int, script: str) -> tuple[list[str], list[str]]:
    """`script` (the part's own) as lines to run before and after the shared bufferization:
    SSA names prefixed, `%root` matches scoped to the part's callee (a fresh handle of it each
    time: a consumed handle of a function would invalidate another one), op tags and knob names
    renumbered to the task's ops."""
    lines = script.splitlines()
    start = next(i for i, ln in enumerate(lines) if "@__transform_main" in ln)
    end = max(i for i, ln in enumerate(lines) if ln.strip() == "transform.yield")
    body = lines[start + 1:end]
    b = next(i for i, ln in enumerate(body) if "one_shot_bufferize" in ln)
    bufd = body[b].split("=")[0].strip()  # the bufferized module's handle in the part's script
    sym = f'attributes{{sym_name = "{part.symbol}"}}'

    # params a script tags an op with (`transform.annotate %op "ansor.op" = %num`: a row
    # sketch renumbering a fill that canonicalization rebuilt): their constants are op numbers too
    tag_params = set(re.findall(rf'transform\.annotate \S+ "{OP_ATTR}" = (%\w+)', script))

    def renumber(ln: str) -> str:
        ln = re.sub(rf"{OP_ATTR} = (\d+) : i64", lambda m: f"{OP_ATTR} = {part.ops[int(m.group(1))]} : i64", ln)
        m = re.match(r"\s*(%\w+) = transform\.param\.constant (\d+) : i64", ln)
        if m and m.group(1) in tag_params:
            ln = ln.replace(f"constant {m.group(2)} : i64", f"constant {part.ops[int(m.group(2))]} : i64", 1)
        return re.sub(r'tune\.knob<"([^"]+)">', lambda m: f'tune.knob<"{part.to_task(m.group(1))}">', ln)

    pre: list[str] = []
    fresh = 0
    for ln in body[:b]:
        ln = renumber(ln).replace(_FUNC + "%root", f'transform.structured.match ops{{["func.func"]}} {sym} in %ROOT')
        ln = _SSA.sub(lambda m: "%ROOT" if m.group(1) == "ROOT" else f"%p{k}_{m.group(1)}", ln)
        if "in %p{k}_root".format(k=k) in ln:  # an op match: inside the callee only
            indent = ln[: len(ln) - len(ln.lstrip())]
            pre.append(f"{indent}%p{k}_fn{fresh} = {_FUNC.replace(' in ', f' {sym} in ')}%root : (!transform.any_op) -> !transform.any_op")
            ln = ln.replace(f"in %p{k}_root", f"in %p{k}_fn{fresh}")
            fresh += 1
        pre.append(ln.replace("%ROOT", "%root"))
    post: list[str] = []
    for ln in body[b + 1:]:
        ln = renumber(ln).replace(_FUNC + bufd, f'transform.structured.match ops{{["func.func"]}} {sym} in %BUFD')
        ln = _SSA.sub(lambda m: "%BUFD" if m.group(1) == "BUFD" else f"%p{k}_{m.group(1)}", ln)
        post.append(ln.replace("%BUFD", "%bufd").replace(f"%p{k}_{bufd[1:]}", "%bufd"))
    return pre, post


def compose(parts: tuple[Part, ...], scripts: list[str], name: str, rule: str) -> str:
    """One transform script running each part's `scripts[k]` on its callee (module docstring)."""
    pre: list[str] = []
    post: list[str] = []
    for k, (part, script) in enumerate(zip(parts, scripts, strict=True)):
        a, b = _scoped(part, k, script)
        pre += [f"    // part {k}: {part.symbol} ({part.sketch.rule})", *a]
        post += [f"    // part {k}: {part.symbol}, mapped to the GPU", *b]
    any_op = "(!transform.any_op) -> !transform.any_op"
    return "\n".join([
        "module attributes {transform.with_named_sequence} {",
        f"  // sketch {name}: {rule} (GPU)",
        "  transform.named_sequence @__transform_main(%payload: !transform.any_op {transform.consumed}) {",
        "    // one function per fusion group (the task's op tags kept), called in order",
        f"    %root = {PARTITION.format(str(parts[0].row_chains).lower())} to %payload : {any_op}",
        *pre,
        "    // every part's tensors at once (the intermediates: buffers between the launches)",
        "    %bufd = transform.bufferization.one_shot_bufferize layout{IdentityLayoutMap} %root "
        f"{{bufferize_function_boundaries = true}} : {any_op}",
        *post,
        "    // the launches into the task function, in call order",
        f'    %inlined = transform.apply_registered_pass "inline" to %bufd : {any_op}',
        "    transform.yield",
        "  }",
        "}",
    ]) + "\n"


class MultiKernelSketch(Sketch):
    """Several GPU kernels in one task (see the module docstring); `parts` hold the structure."""

    def __init__(self, name: str, rule: str, parts: tuple[Part, ...]) -> None:
        self.name = name
        self.rules = (rule,)
        self.parts = parts
        self.knobs = tuple(Knob(p.to_task(kn.name), kn.options) for p in parts for kn in p.sketch.knobs)

    def _local(self, values: Mapping[str, int]) -> list[dict[str, int]]:
        """`values` split into each part's own knob names."""
        out = []
        for p in self.parts:
            own = {kn.name: p.to_task(kn.name) for kn in p.sketch.knobs}
            out.append({local: values[task] for local, task in own.items() if task in values})
        return out

    def _merge(self, per_part: list[Mapping[str, int]]) -> dict[str, int]:
        return {p.to_task(n): int(v) for p, vals in zip(self.parts, per_part, strict=True) for n, v in vals.items()}

    @property
    def splits(self) -> tuple[LoopSplit, ...]:
        return tuple(replace(s, op=p.ops[s.op]) for p in self.parts for s in p.sketch.splits)

    @property
    def unroll_knobs(self) -> tuple[str, ...]:
        return tuple(p.to_task(n) for p in self.parts for n in p.sketch.unroll_knobs)

    @property
    def free_tile_knobs(self) -> tuple[str, ...]:
        return tuple(p.to_task(n) for p in self.parts for n in p.sketch.free_tile_knobs)

    @property
    def knob_groups(self) -> tuple[tuple[str, ...], ...]:
        """A part's knobs come from one parent (crossover mixes whole parts)."""
        return tuple(tuple(p.to_task(kn.name) for kn in p.sketch.knobs) for p in self.parts)

    def innermost_limit(self, split: LoopSplit) -> int:
        for p in self.parts:
            for s in p.sketch.splits:
                if replace(s, op=p.ops[s.op]) == split:
                    return p.sketch.innermost_limit(s)
        return super().innermost_limit(split)

    def complete(self, values: Mapping[str, int]) -> dict[str, int]:
        done = [p.sketch.complete(v) for p, v in zip(self.parts, self._local(values), strict=True)]
        return {**dict(values), **self._merge(done)}

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str:
        local = self._local(self.complete(values)) if values is not None else [None] * len(self.parts)
        scripts = [p.sketch.script(v, lower_vectors=lower_vectors) for p, v in zip(self.parts, local, strict=True)]
        return compose(self.parts, scripts, self.name, self.rule)

    def validate(self, values: Mapping[str, int]) -> str | None:
        known = {kn.name for kn in self.knobs}
        extra = sorted(set(values) - known)
        if extra:
            return f"knobs {', '.join(extra)} are not knobs of sketch {self.name}"
        for k, (p, v) in enumerate(zip(self.parts, self._local(values), strict=True)):
            why = p.sketch.validate(v)
            if why:
                return f"part {k} ({p.symbol}): {why}"
        return None

    def sample(self, rng: random.Random) -> Schedule:
        return Schedule.of(self.name, self._merge([p.sketch.sample(rng).values() for p in self.parts]))

    def search_space(self, ragged_prob: float) -> SearchSpace:
        return MultiKernelSearchSpace(self, ragged_prob)

    def __hash__(self) -> int:
        return hash((self.name, self.rules, tuple((p.symbol, p.ops, p.task.hash) for p in self.parts)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultiKernelSketch) and hash(self) == hash(other)


class MultiKernelSearchSpace(SearchSpace):
    """The generic search space over all the parts' knobs, valid and sampled as each part's own
    search space says (ragged tiles off in every part when the search's `ragged_prob` is 0)."""

    def __init__(self, sketch: MultiKernelSketch, ragged_prob: float) -> None:
        super().__init__(sketch, ragged_prob)
        self.multi = sketch
        self.part_spaces = tuple(p.sketch.search_space(ragged_prob) for p in sketch.parts)

    def valid(self, values: Mapping[str, int]) -> bool:
        if not super().valid(values):
            return False
        return all(sp.valid(v) for sp, v in zip(self.part_spaces, self.multi._local(values), strict=True))

    def sample(self, rng: random.Random) -> Schedule:
        return Schedule.of(self.multi.name, self.multi._merge([sp.sample(rng).values() for sp in self.part_spaces]))


def default_multi_kernel_script(task: SearchTask, parts: tuple[Part, ...], rule: str) -> str:
    """The untuned program: every part's untuned GPU program, composed."""
    from ansor.targets.cuda.rules import default_script

    return compose(parts, [default_script(p.task) for p in parts], "default", rule)
