// RUN: %ansor-opt %s -split-input-file -allow-unregistered-dialect -ansor-auto-unroll -canonicalize \
// RUN:   -verify-diagnostics | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -allow-unregistered-dialect \
// RUN:   -ansor-auto-unroll=default-max-step=6 -canonicalize -verify-diagnostics | FileCheck %s --check-prefix=DEFAULT

// work(j) = 2, work(i) = 2 * 2 = 4 <= 4: the whole nest becomes straight-line code.
// CHECK-LABEL: func.func @perfect_nest_fits
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-NOT: scf.for
// CHECK: "use.it"(%[[C0]], %[[C0]])
// CHECK-NEXT: "use.it"(%[[C0]], %[[C1]])
// CHECK-NEXT: "use.it"(%[[C1]], %[[C0]])
// CHECK-NEXT: "use.it"(%[[C1]], %[[C1]])
// CHECK-NOT: ansor.auto_unroll_max_step
// CHECK: return
func.func @perfect_nest_fits() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c2 step %c1 {
      "use.it"(%i, %j) : (index, index) -> ()
    }
  } {ansor.auto_unroll_max_step = 4 : i64}
  return
}

// -----

// work(j) = 4 <= 8 but work(i) = 4 * 4 = 16 > 8: only the inner loop is unrolled.
// CHECK-LABEL: func.func @perfect_nest_too_big
// CHECK: scf.for %[[I:.*]] =
// CHECK-COUNT-4: "use.it"(%[[I]], %{{.*}})
// CHECK-NOT: "use.it"
// CHECK-NOT: scf.for
// CHECK-NOT: ansor.auto_unroll_max_step
func.func @perfect_nest_too_big() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      "use.it"(%i, %j) : (index, index) -> ()
    }
  } {ansor.auto_unroll_max_step = 8 : i64}
  return
}

// -----

// Trip count 8 / step 2 = 4 per inner loop; the outer bound is dynamic (infinite work).
// CHECK-LABEL: func.func @dynamic_outer
// CHECK: scf.for
// CHECK-COUNT-4: "use.it"
// CHECK-NOT: "use.it"
func.func @dynamic_outer(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %c8 step %c2 {
      "use.it"(%i, %j) : (index, index) -> ()
    }
  } {ansor.auto_unroll_max_step = 64 : i64}
  return
}

// -----

// Imperfect nest: work(i) = 2 * (2 + 3) = 10 <= 10, so 10 bodies in all.
// CHECK-LABEL: func.func @imperfect_nest
// CHECK-NOT: scf.for
// CHECK-COUNT-2: "use.a"
// CHECK-COUNT-3: "use.b"
// CHECK-COUNT-2: "use.a"
// CHECK-COUNT-3: "use.b"
// CHECK-NOT: scf.for
func.func @imperfect_nest() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c2 step %c1 {
    scf.for %j = %c0 to %c2 step %c1 {
      "use.a"(%i, %j) : (index, index) -> ()
    }
    scf.for %k = %c0 to %c3 step %c1 {
      "use.b"(%i, %k) : (index, index) -> ()
    }
  } {ansor.auto_unroll_max_step = 10 : i64}
  return
}

// -----

// Loop-carried vector accumulator: three chained adds, the init value feeds the first.
// CHECK-LABEL: func.func @vector_accumulator
// CHECK-SAME: (%[[V:.*]]: vector<4xf32>)
// CHECK-NOT: scf.for
// CHECK: %[[A0:.*]] = arith.addf %[[V]], %[[V]]
// CHECK: %[[A1:.*]] = arith.addf %[[A0]], %[[V]]
// CHECK: %[[A2:.*]] = arith.addf %[[A1]], %[[V]]
// CHECK: return %[[A2]]
func.func @vector_accumulator(%v: vector<4xf32>) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %k = %c0 to %c3 step %c1 iter_args(%a = %v) -> vector<4xf32> {
    %s = arith.addf %a, %v : vector<4xf32>
    scf.yield %s : vector<4xf32>
  } {ansor.auto_unroll_max_step = 3 : i64}
  return %r : vector<4xf32>
}

// -----

// N = 0 only removes the pragma; the pragma may sit on any op with regions (here the function).
// CHECK-LABEL: func.func @zero_step
// CHECK: scf.for
// CHECK-NOT: ansor.auto_unroll_max_step
// CHECK-LABEL: func.func @on_function
// CHECK-NOT: scf.for
// CHECK-COUNT-2: "use.it"
func.func @zero_step() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    "use.it"(%i) : (index) -> ()
  } {ansor.auto_unroll_max_step = 0 : i64}
  return
}
func.func @on_function() attributes {ansor.auto_unroll_max_step = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    "use.it"(%i) : (index) -> ()
  }
  return
}

// -----

// Without the pragma nothing happens, unless default-max-step is set: with 6, the loop of 8
// iterations is kept and the one of 4 unrolled.
// CHECK-LABEL: func.func @unannotated
// CHECK-COUNT-2: scf.for
// DEFAULT-LABEL: func.func @unannotated
// DEFAULT: scf.for
// DEFAULT-NEXT: "use.big"
// DEFAULT-NOT: scf.for
// DEFAULT-COUNT-4: "use.small"
func.func @unannotated() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    "use.big"(%i) : (index) -> ()
  }
  scf.for %i = %c0 to %c4 step %c1 {
    "use.small"(%i) : (index) -> ()
  }
  return
}

// -----

// An annotated loop keeps its own decision under default-max-step: one loop is left.
// CHECK-LABEL: func.func @annotated_wins
// DEFAULT-LABEL: func.func @annotated_wins
// DEFAULT: scf.for
// DEFAULT-NOT: scf.for
func.func @annotated_wins() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %i = %c0 to %c2 step %c1 {
    "use.it"(%i) : (index) -> ()
  } {ansor.auto_unroll_max_step = 1 : i64}
  return
}

// -----

func.func @bad_value(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'scf.for' op 'ansor.auto_unroll_max_step' must be non-negative, got -3}}
  scf.for %i = %c0 to %n step %c1 {
  } {ansor.auto_unroll_max_step = -3 : i64}
  return
}

// -----

// A 2-D vector value weighs its rows: 4 iterations x 8 rows of vector<8x16xf32> = 32 > 16, so
// the loop stays (it would be 4 <= 16 if a vector op counted as one statement); 64 unrolls it.
// CHECK-LABEL: func.func @vector_rows
// DEFAULT-LABEL: func.func @vector_rows
// CHECK:         scf.for
// CHECK-LABEL: func.func @vector_rows_unrolled
// CHECK-NOT:     scf.for
// CHECK-COUNT-4: "use.vec"
func.func @vector_rows(%v: vector<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %w = arith.addf %v, %v : vector<8x16xf32>
    "use.vec"(%w) : (vector<8x16xf32>) -> ()
  } {ansor.auto_unroll_max_step = 16 : i64}
  return
}
func.func @vector_rows_unrolled(%v: vector<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %w = arith.addf %v, %v : vector<8x16xf32>
    "use.vec"(%w) : (vector<8x16xf32>) -> ()
  } {ansor.auto_unroll_max_step = 64 : i64}
  return
}

// -----

// A linalg op left in the body (not vectorized) becomes loops later: it weighs its iterations.
// work(i) = 8 * 16 = 128 > 64: not unrolled (it used to count as 8 and was).
// CHECK-LABEL: func.func @linalg_body_weighs_its_iterations
// CHECK: scf.for
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
// CHECK-NOT: ansor.auto_unroll_max_step
func.func @linalg_body_weighs_its_iterations(%m: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %f = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %row = memref.subview %m[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.fill ins(%f : f32) outs(%row : memref<16xf32, strided<[1], offset: ?>>)
  } {ansor.auto_unroll_max_step = 64 : i64}
  return
}

// -----

// work(i) = 4 * 16 = 64 <= 64: unrolled, four fills.
// CHECK-LABEL: func.func @linalg_body_fits
// CHECK-NOT: scf.for
// CHECK-COUNT-4: linalg.fill
// CHECK-NOT: ansor.auto_unroll_max_step
func.func @linalg_body_fits(%m: memref<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    %row = memref.subview %m[%i, 0] [1, 16] [1, 1] : memref<4x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.fill ins(%f : f32) outs(%row : memref<16xf32, strided<[1], offset: ?>>)
  } {ansor.auto_unroll_max_step = 64 : i64}
  return
}
