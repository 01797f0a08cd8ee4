"""The text of a templated GPU kernel being emitted (`tensorcore.py`, `scores_softmax.py`).

    KernelText.emit(line) --> lines of the gpu.launch body; KernelText.c(x) --> "%cx", the index
    constant x, recorded in `consts` so the kernel declares each one once at the top of its body;
    KernelText.dynamic_shared(I, size) --> %dyn, the kernel's dynamic shared buffer, clear of the
    static mbarriers (launch it with size + DYNAMIC_SHARED_SLACK bytes)
"""

from __future__ import annotations

#: Bytes a kernel's dynamic shared buffer (`KernelText.dynamic_shared`) may start past the address
#: `gpu.dynamic_shared_memory` gives it: a kernel launches with its buffer's size plus these.
DYNAMIC_SHARED_SLACK = 1024


class KernelText:
    """The lines of a gpu.launch body and the index constants they use."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: set[int] = set()

    def emit(self, line: str) -> None:
        """Appends `line` (indented by the caller) to the body."""
        self.lines.append(line)

    def c(self, x: int) -> str:
        """The SSA name of the index constant `x` (declared with the others at the top of the body)."""
        self.consts.add(x)
        return f"%c{x}"

    def dynamic_shared(self, I: str, size: int) -> None:
        """%dyn: `size` bytes of dynamic shared memory at the first 1024-byte boundary past the
        address `gpu.dynamic_shared_memory` returns (1024-aligned, as the 128-byte swizzle of TMA
        boxes and wgmma descriptors need).

        MLIR 22 lowers `gpu.dynamic_shared_memory` to an internal zero-length global that NVPTX
        prints as a 1-byte *static* variable (`.shared .align 16 .b8 __dynamic_shmem__0;`, not an
        extern array), and ptxas lays the static mbarriers of `nvgpu.mbarrier.create` right behind
        it (0x400 and 0x408 on sm_90). Used from that address, the buffer's bytes 8.. were the
        mbarriers: row 0 of stage 0's A box and of the staged f32 tile. On an H200 that left NaN in
        tile row 0 of split-K 8 and TF32 split-K 4 results (`tools/splitk_probe.py`,
        results/tensor-core/README.md); starting past the static variables, no run was wrong.
        The static variables must stay under DYNAMIC_SHARED_SLACK bytes (a few mbarriers)."""
        emit, c = self.emit, self.c
        emit(f"{I}%dyn0 = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>")
        emit(f"{I}%dynw = memref.memory_space_cast %dyn0 : memref<?xi8, #gpu.address_space<workgroup>> "
             "to memref<?xi8, 3>")
        emit(f"{I}%dyna = memref.extract_aligned_pointer_as_index %dynw : memref<?xi8, 3> -> index")
        emit(f"{I}%dyno = arith.ori %dyna, {c(DYNAMIC_SHARED_SLACK - 1)} : index")
        emit(f"{I}%dynb = arith.addi %dyno, {c(1)} : index")
        emit(f"{I}%dynsh = arith.subi %dynb, %dyna : index")
        emit(f"{I}%dyn = memref.view %dynw[%dynsh][{c(size)}] : memref<?xi8, 3> to memref<?xi8, 3>")

    def stepped_mmas(self, J: str, a: str, b: str, steps: int, step_bytes: int, ta: str, tb: str,
                     b_map: str) -> None:
        """%acc2 = %acc + `steps` warpgroup MMAs, one op per K step, each on descriptors of views
        `ta` / `tb` this kernel offsets itself (`step_bytes` a step from the byte offsets `a`, `b`
        in %dyn; B's descriptor from TMA map `b_map`, "A" or "B"). Upstream `nvgpu.warpgroup.mma`
        (MLIR 22) steps a K-major B descriptor by whole rows between the K steps of one op, so a
        K-major B (TF32, attention's K) takes one op per step."""
        emit, c = self.emit, self.c
        acc = "%acc"
        for q in range(steps):
            emit(f"{J}%oa{q} = arith.addi {a}, {c(q * step_bytes)} : index")
            emit(f"{J}%ob{q} = arith.addi {b}, {c(q * step_bytes)} : index")
            emit(f"{J}%sa{q} = memref.view %dyn[%oa{q}][] : memref<?xi8, 3> to {ta}")
            emit(f"{J}%sb{q} = memref.view %dyn[%ob{q}][] : memref<?xi8, 3> to {tb}")
            # (the descriptor takes its 128-byte swizzle from the TMA map, its address from the view)
            emit(f"{J}%da{q} = nvgpu.warpgroup.generate.descriptor %sa{q}, %tA : {ta}, !tmA -> !dA")
            emit(f"{J}%db{q} = nvgpu.warpgroup.generate.descriptor %sb{q}, %t{b_map} : {tb}, !tm{b_map} -> !dB")
            out = "%acc2" if q == steps - 1 else f"%acck{q}"
            emit(f"{J}{out} = nvgpu.warpgroup.mma %da{q}, %db{q}, {acc} : !dA, !dB, !acc -> !acc")
            acc = out
