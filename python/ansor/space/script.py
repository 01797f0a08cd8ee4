"""What every target's sketch renderer shares: writing a transform-dialect script with knob holes.

    ScriptBuilder(values) --knob_line / match / fuse_into / fresh / emit--> lines of
        `transform.named_sequence @__transform_main` (the target's renderer adds its tilings)
    values None  -> holes: `transform.tune.knob<"name"> options = [...]`, `{name}` in attributes
    values given -> the same script with every knob resolved (`= V from options = [...]`)
"""

from __future__ import annotations

from collections.abc import Mapping

from ansor.space.sketch import Knob

#: Handle and parameter types of the scripts.
ANY = "!transform.any_op"
PARAM = "!transform.param<i64>"


def ssa(name: str) -> str:
    """The SSA name of knob `name`'s value in a script."""
    return "%k_" + name.replace(".", "_")


class ScriptBuilder:
    """Accumulates the body of a script: fresh SSA names, lines, knobs, matches and fusions."""

    def __init__(self, values: Mapping[str, int] | None) -> None:
        self.values = values
        self.lines: list[str] = []
        self.n = 0

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"%{base}{self.n}"

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def value(self, name: str) -> str:
        """A knob as a static number (filled scripts) or as `{name}` (holes in static attributes)."""
        if self.values is None:
            return "{" + name + "}"
        return str(int(self.values[name]))

    def knob_line(self, k: Knob) -> str:
        """The `transform.tune.knob` op of `k`: a hole, or resolved to its value."""
        opts = ", ".join(str(o) for o in k.options)
        if self.values is None:
            return f'{ssa(k.name)} = transform.tune.knob<"{k.name}"> options = [{opts}] -> {PARAM}'
        if k.name not in self.values:
            raise KeyError(f"no value for knob {k.name!r}")
        v = int(self.values[k.name])
        if v not in k.options:
            raise ValueError(f"knob {k.name!r} = {v} is not one of its options")
        return f'{ssa(k.name)} = transform.tune.knob<"{k.name}"> = {v} : i64 from options = [{opts}] -> {PARAM}'

    def match(self, attr: str, num: int) -> str:
        """A handle to the op tagged `attr = num` (see `core/loops.tag_ops`)."""
        v = self.fresh("m")
        self.emit(f"{v} = transform.structured.match attributes{{{attr} = {num} : i64}} in %root : ({ANY}) -> {ANY}")
        return v

    def fuse_into(self, producer: str, container: str) -> tuple[str, str]:
        """Fuse `producer` into the loop `container`: (fused op, new container)."""
        fused, new = self.fresh("fused"), self.fresh("c")
        self.emit(f"{fused}, {new} = transform.structured.fuse_into_containing_op {producer} into {container}"
                  f" : ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        return fused, new
