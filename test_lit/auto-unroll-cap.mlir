// RUN: %ansor-opt %s -allow-unregistered-dialect -ansor-auto-unroll=max-unrolled-work=8 -canonicalize | FileCheck %s
// RUN: %ansor-opt %s -allow-unregistered-dialect -ansor-auto-unroll -canonicalize | FileCheck %s --check-prefix=NOCAP

// Four sibling nests (a register tile the schedule unrolled leaves one reduction nest per
// accumulator), each of work 2 * 2 = 4 <= the max step 4 and of size 4 (one scalar op per
// iteration; sizes are tested in auto-unroll-size.mlir). Unrolled whole they are 16 straight-line
// ops; with max-unrolled-work=8 the largest outermost nests stay loops (largest first, then the
// next) until the unrolled code fits: every outer loop stays, every inner loop unrolls (4 x 2).
// CHECK-LABEL: func.func @siblings
// CHECK-COUNT-4: scf.for
// CHECK-NOT: scf.for
// NOCAP-LABEL: func.func @siblings
// NOCAP-NOT: scf.for
// NOCAP-COUNT-16: "use.it"
func.func @siblings() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  "test.wrap"() ({
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        "use.it"(%i, %j) : (index, index) -> ()
      }
    }
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        "use.it"(%i, %j) : (index, index) -> ()
      }
    }
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        "use.it"(%i, %j) : (index, index) -> ()
      }
    }
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        "use.it"(%i, %j) : (index, index) -> ()
      }
    }
    "test.end"() : () -> ()
  }) {ansor.auto_unroll_max_step = 4 : i64} : () -> ()
  return
}
